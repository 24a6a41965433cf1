package io.etserve.runtime;

/** The native bridge or a library it needs could not be loaded; the message says which and why. */
public class NativeLibraryException extends RuntimeException {
    public NativeLibraryException(String message, Throwable cause) {
        super(message, cause);
    }
}
