"""The discrete-event engine: the only part of ghsim that advances time (on simpy)."""
