"""Write a copy of a GGUF model with one F32 tensor perturbed, per channel:
w' = w * (1 + sd * N(0, 1)), seeded. A stand-in for a runtime that computes
one layer wrong (a broken kernel, a bad conversion): the model still talks,
and answers worse.

    perturb-gguf.py SRC DST TENSOR SD SEED

Uses the `gguf` package (llama.cpp's own reader/writer, from PyPI) to find
the tensor; the copy is written beside DST and renamed into place.
"""

import os
import shutil
import sys

import numpy as np
from gguf import GGUFReader, GGMLQuantizationType


def main(src, dst, tensor, sd, seed):
    tmp = dst + ".tmp"
    shutil.copyfile(src, tmp)
    reader = GGUFReader(tmp, "r+")
    found = [t for t in reader.tensors if t.name == tensor]
    if not found:
        os.remove(tmp)
        sys.exit(f"perturb-gguf: no tensor {tensor!r} in {src}")
    t = found[0]
    if t.tensor_type != GGMLQuantizationType.F32:
        os.remove(tmp)
        sys.exit(f"perturb-gguf: {tensor} is {t.tensor_type.name}; only F32 tensors are perturbed")
    rng = np.random.default_rng(seed)
    t.data[...] = t.data * (1.0 + sd * rng.standard_normal(t.data.shape)).astype(np.float32)
    reader.data.flush()
    del reader
    os.replace(tmp, dst)


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))
