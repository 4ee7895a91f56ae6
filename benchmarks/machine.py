"""One line naming the hardware, software and date, for the header of every benchmark table."""

import datetime
import os
import platform


def describe_machine() -> str:
    import torch

    cpu = platform.processor() or "cpu"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    device = (
        torch.cuda.get_device_name(0)
        if torch.cuda.is_available()
        else f"no GPU, {os.cpu_count()} CPU cores ({cpu})"
    )
    return f"{device}; torch {torch.__version__}; {datetime.date.today().isoformat()}"
