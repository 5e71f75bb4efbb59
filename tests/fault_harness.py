"""Runs ``python -m transformer_lib.train`` with faults injected at chosen moments.

    FAULT=SIGINT@step:3 python tests/fault_harness.py --task dates ...

``FAULT`` is a comma-separated list of ``SIGNAL@step:K`` (the signal arrives while step K is
computed) or ``SIGNAL@save:K`` (while the K-th checkpoint write of this process is half
written: the first half of its bytes is in the temporary file, the second is not). The
process sends the signal to itself, so the moment is exact; the handling is the one a signal
from a terminal or a job scheduler gets.
"""

import io
import os
import signal
import sys

import torch

from transformer_lib import train
from transformer_lib.training import Trainer


def inject(fault: str) -> None:
    name, moment = fault.split("@")
    kind, count = moment.split(":")
    signum, count = getattr(signal, name), int(count)
    if kind == "step":
        real_step = Trainer.train_step

        def train_step(self, batch, lr):
            if self.step + 1 == count:
                os.kill(os.getpid(), signum)
            return real_step(self, batch, lr)

        Trainer.train_step = train_step
    elif kind == "save":
        real_save, calls = torch.save, []

        def save(obj, f, *args, **kwargs):
            calls.append(1)
            if len(calls) != count:
                return real_save(obj, f, *args, **kwargs)
            buffer = io.BytesIO()
            real_save(obj, buffer, *args, **kwargs)
            data = buffer.getvalue()
            f.write(data[: len(data) // 2])
            f.flush()
            os.kill(os.getpid(), signum)  # SIGKILL ends here; the others are handled
            f.write(data[len(data) // 2 :])

        torch.save = save
    else:
        raise ValueError(f"FAULT: moment must be step:K or save:K, got {moment!r}")


if __name__ == "__main__":
    for fault in filter(None, os.environ.get("FAULT", "").split(",")):
        inject(fault)
    sys.exit(train.main(sys.argv[1:]))
