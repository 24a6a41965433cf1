"""What the Triton client checks share: one line per check, and the status of a refused call.
Imported by the check scripts beside it (Python puts a script's own folder on sys.path)."""
import sys

from tritonclient.utils import InferenceServerException


def check(what, ok, detail=""):
    """Prints the check; exits non-zero on the first failure."""
    print(("ok    " if ok else "FAIL  ") + what + (f": {detail}" if detail else ""), flush=True)
    if not ok:
        sys.exit(1)


def refused(call):
    """(status, message) of the InferenceServerException the call raised, or (None, None) when it succeeded.
    The status is a string: "400" over HTTP, "StatusCode.INVALID_ARGUMENT" over gRPC."""
    try:
        call()
    except InferenceServerException as e:
        return str(e.status()), e.message()
    return None, None
