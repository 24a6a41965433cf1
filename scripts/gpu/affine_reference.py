"""Writes reference.json for a bench affine program (y = 2x + 1, FP32) on a host without the
export's Python packages: seeded inputs in [-1, 1), outputs computed here in double precision and
rounded once to FP32, the value an FP32 multiply-add gives. The export writes the same file from
PyTorch (scripts/export/export_models.py, affine_spec); the data-path step's models travel
without it, since 4 MiB of floats is ~55 MB of JSON.

Usage: affine_reference.py MODEL_DIR N   (N: the number of elements; shape [1, N])
"""
import json
import random
import sys
from array import array
from pathlib import Path


def main() -> None:
    model_dir, n = Path(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(70)
    assert array("f").itemsize == 4
    x = array("f", (rng.uniform(-1.0, 1.0) for _ in range(n)))  # rounded to FP32 on the way in
    y = array("f", (2.0 * v + 1.0 for v in x))
    case = {
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, n], "data": x.tolist()}],
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [1, n], "data": y.tolist()}],
    }
    reference = {"tolerance": {"atol": 1e-05, "rtol": 0.0001}, "cases": [case]}
    (model_dir / "1" / "reference.json").write_text(json.dumps(reference))


if __name__ == "__main__":
    main()
