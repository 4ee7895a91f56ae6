"""Executes the scheduler's decisions on a device: batch inputs, the model runner, the sampler, and
how device, dtype and KV pool size are resolved."""
