package io.etserve.config;

import io.etserve.runtime.NativeLibraryException;
import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;

/** A missing or incompatible native library ends startup with one sentence, not a stack of link errors. */
class NativeLibraryFailureAnalyzer extends AbstractFailureAnalyzer<NativeLibraryException> {
    @Override
    protected FailureAnalysis analyze(Throwable root, NativeLibraryException cause) {
        return new FailureAnalysis(cause.getMessage(),
                "Use the jar as built (it carries its native libraries), or point etserve.native.library-dir at"
                        + " the directory holding this build's libetserve_jni.so and the ExecuTorch libraries.",
                cause);
    }
}
