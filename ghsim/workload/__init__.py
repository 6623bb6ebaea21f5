"""Workloads: what each GPU computes and communicates in one training step."""

from ghsim.workload.modelsize import ParamCount, model_flops_per_token, parameter_count

__all__ = ["ParamCount", "model_flops_per_token", "parameter_count"]
