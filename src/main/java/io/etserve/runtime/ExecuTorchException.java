package io.etserve.runtime;

/**
 * An error reported by ExecuTorch or by the bridge around it.
 *
 * <p>{@link #errorName()} is ExecuTorch's error name ({@code InvalidProgram},
 * {@code InvalidArgument}, {@code OperatorMissing}, ...) or one of the bridge's own
 * ({@code CudaError}, {@code Internal}); {@link #nativeLog()} holds the lines ExecuTorch
 * logged on the calling thread during the failed call.
 */
public class ExecuTorchException extends RuntimeException {

    private final String errorName;
    private final int errorCode;
    private final String nativeLog;

    // Called from the bridge (jni_bridge.cpp): keep the signature in step with it.
    public ExecuTorchException(String errorName, int errorCode, String message, String nativeLog) {
        super(compose(errorName, message, nativeLog));
        this.errorName = errorName;
        this.errorCode = errorCode;
        this.nativeLog = nativeLog == null ? "" : nativeLog;
    }

    private static String compose(String name, String message, String log) {
        String base = printable(withoutFileBytes(message)) + " (" + name + ")";
        return log == null || log.isBlank() ? base
                : base + ": " + printable(withoutFileBytes(log.strip().replace('\n', ';')));
    }

    /** What ExecuTorch writes before a file's own four identifier bytes (a program, a .ptd). */
    private static final String IDENTIFIER = " identifier '";
    private static final String EXPECTED = "' != expected '";

    /**
     * {@code s} without the four bytes ExecuTorch quotes from a file that is not what it should be
     * ({@code Program identifier 'xxxx' != expected 'ET12'}): a {@code model.pte} linked to
     * another file would show a piece of that file to whoever reads the load's reason.
     */
    static String withoutFileBytes(String s) {
        if (s == null) {
            return null;
        }
        StringBuilder b = null;
        int copied = 0;  // s up to here is in b (once there is a b)
        for (int at = s.indexOf(IDENTIFIER); at >= 0; ) {
            int bytes = at + IDENTIFIER.length();
            int end = s.indexOf(EXPECTED, bytes);
            if (end < 0 || end - bytes > 4) {
                at = s.indexOf(IDENTIFIER, bytes);
                continue;
            }
            if (b == null) {
                b = new StringBuilder(s.length());
            }
            b.append(s, copied, at).append(" identifier (bytes 4-7 of the file, not shown) != expected '");
            copied = end + EXPECTED.length();
            at = s.indexOf(IDENTIFIER, copied);
        }
        return b == null ? s : b.append(s, copied, s.length()).toString();
    }

    /**
     * {@code s} with control characters as {@code ?}: the message quotes bytes of an untrusted
     * program (an identifier, a name) and goes to logs and to clients, where a raw escape or
     * carriage return could forge or hide a line.
     */
    private static String printable(String s) {
        if (s == null) {
            return "";
        }
        StringBuilder b = null;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (Character.isISOControl(c) || c == '\u2028' || c == '\u2029') {
                if (b == null) {
                    b = new StringBuilder(s.length()).append(s, 0, i);
                }
                b.append('?');
            } else if (b != null) {
                b.append(c);
            }
        }
        return b == null ? s : b.toString();
    }

    public String errorName() {
        return errorName;
    }

    public int errorCode() {
        return errorCode;
    }

    public String nativeLog() {
        return nativeLog;
    }

    /** True for errors caused by the caller's input rather than by the program or runtime. */
    public boolean isInvalidInput() {
        return "InvalidArgument".equals(errorName) || "InvalidType".equals(errorName);
    }

    /**
     * True when a delegate could not carry the inputs' dimensions through its graph: XNNPACK's
     * shape propagation failed (an {@code Internal} error it names in the log).
     */
    public boolean isShapePropagationFailure() {
        return "Internal".equals(errorName) && (nativeLog.contains("Propagating input shapes failed")
                || nativeLog.contains("Reshape Input Tensor Failed"));
    }

    /** True for CUDA failures, which may leave the device unusable. */
    public boolean isCudaError() {
        return "CudaError".equals(errorName);
    }

    /**
     * True when the call gave up waiting for its GPU work (the bridge's completion timeout, CUDA's
     * {@code cudaErrorLaunchTimeout}): that work may still run on the call's stream, in its
     * instance's memory.
     */
    public boolean leftGpuWorkRunning() {
        return isCudaError() && errorCode == CUDA_LAUNCH_TIMEOUT;
    }

    private static final int CUDA_LAUNCH_TIMEOUT = 702;
}
