package io.etserve.cuda;

/** A CUDA runtime call failed; {@link #sticky()} errors leave the context unusable until restart. */
public class CudaException extends RuntimeException {

    private final int code;
    private final String errorName;

    public CudaException(String call, int code, String errorName, String description) {
        super(call + " failed: " + errorName + " (" + code + "): " + description);
        this.code = code;
        this.errorName = errorName;
    }

    public int code() {
        return code;
    }

    public String errorName() {
        return errorName;
    }

    /**
     * Errors after which every later call in the process fails too (the CUDA context is
     * corrupted): only a process restart recovers.
     */
    public boolean sticky() {
        return isSticky(errorName);
    }

    /** The same errors by cudaError_t code, as the bridge reports them. */
    public static boolean isStickyCode(int code) {
        return switch (code) {
            case 46, 214, 700, 702, 709, 710, 714, 715, 716, 717, 718, 719, 999 -> true;
            default -> false;
        };
    }

    public static boolean isSticky(String errorName) {
        return switch (errorName) {
            case "cudaErrorIllegalAddress", "cudaErrorLaunchFailure", "cudaErrorHardwareStackError",
                    "cudaErrorIllegalInstruction", "cudaErrorMisalignedAddress", "cudaErrorInvalidAddressSpace",
                    "cudaErrorInvalidPc", "cudaErrorAssert", "cudaErrorLaunchTimeout", "cudaErrorECCUncorrectable",
                    "cudaErrorUnknown", "cudaErrorContextIsDestroyed", "cudaErrorDevicesUnavailable" -> true;
            default -> false;
        };
    }
}
