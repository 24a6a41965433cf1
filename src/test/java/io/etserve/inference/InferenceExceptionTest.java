package io.etserve.inference;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.cuda.CudaException;
import io.etserve.runtime.ExecuTorchException;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** Every failure has one kind: the subtypes say theirs, and {@link InferenceException#of} sorts the rest. */
class InferenceExceptionTest {

    @Test
    void eachSubtypeSaysItsKind() {
        assertThat(new InvalidInputException("x").kind()).isEqualTo(InferenceException.Kind.INVALID_INPUT);
        assertThat(new ModelNotFoundException("x").kind()).isEqualTo(InferenceException.Kind.NOT_FOUND);
        assertThat(new ModelUnavailableException("x").kind()).isEqualTo(InferenceException.Kind.UNAVAILABLE);
        assertThat(new OverloadedException("x", Duration.ZERO).kind()).isEqualTo(InferenceException.Kind.OVERLOADED);
        assertThat(new InferenceFailedException(new IllegalStateException()).kind())
                .isEqualTo(InferenceException.Kind.FAILED);
    }

    @Test
    void aDroppedRequestsKindIsWhyItWasDropped() {
        assertThat(cancelled(RequestCancelledException.Reason.CLIENT).kind())
                .isEqualTo(InferenceException.Kind.CLIENT_GONE);
        assertThat(cancelled(RequestCancelledException.Reason.DEADLINE).kind())
                .isEqualTo(InferenceException.Kind.DEADLINE_EXCEEDED);
        assertThat(cancelled(RequestCancelledException.Reason.TIMEOUT).kind())
                .isEqualTo(InferenceException.Kind.TIMED_OUT);
    }

    @Test
    void onlyTheUnavailableAndTheOverloadedSayWhenToRetry() {
        assertThat(new ModelUnavailableException("x", Duration.ofSeconds(3)).retryAfter()).hasSeconds(3);
        assertThat(new ModelUnavailableException("x").retryAfter()).as("a failed load has no known end").isNull();
        assertThat(new OverloadedException("x", Duration.ofSeconds(2)).retryAfter()).hasSeconds(2);
        assertThat(new InvalidInputException("x").retryAfter()).isNull();
        assertThat(cancelled(RequestCancelledException.Reason.TIMEOUT).retryAfter()).as("the client set the limit")
                .isNull();
    }

    @Test
    void aMemberOfTheFamilyIsItsOwnKind() {
        OverloadedException overloaded = new OverloadedException("x", Duration.ZERO);
        assertThat(InferenceException.of(overloaded)).isSameAs(overloaded);
        assertThat(InferenceException.of(overloaded, "m")).isSameAs(overloaded);
    }

    @Test
    void executorchsVerdictOnABadArgumentIsTheCallersMistake() {
        ExecuTorchException bad = new ExecuTorchException("InvalidArgument", 0x12, "input 0 has the wrong size", "");
        InferenceException e = InferenceException.of(bad, "m");
        assertThat(e).isInstanceOf(InvalidInputException.class).hasCause(bad)
                .hasMessage("model 'm' rejected the input: input 0 has the wrong size (InvalidArgument)");
        assertThat(InferenceException.of(new ExecuTorchException("InvalidType", 0x13, "x", "")).kind())
                .isEqualTo(InferenceException.Kind.INVALID_INPUT);
    }

    @Test
    void anyOtherRuntimeFailureFailedTheRequestAndSaysWhatExecuTorchReported() {
        ExecuTorchException oom = new ExecuTorchException("MemoryAllocationFailed", 0x21, "out of memory", "log line");
        InferenceException e = InferenceException.of(oom, "m");
        assertThat(e).isInstanceOf(InferenceFailedException.class).hasCause(oom)
                .hasMessage("inference failed: out of memory (MemoryAllocationFailed): log line");
        assertThat(((InferenceFailedException) e).unexpected()).isFalse();
    }

    @Test
    void aCudaCallsFailureFailedTheRequestAndSaysWhatCudaReported() {
        CudaException lost = new CudaException("cudaMemcpyAsync", 700, "cudaErrorIllegalAddress",
                "an illegal memory access was encountered");
        InferenceException e = InferenceException.of(lost, "m");
        assertThat(e).isInstanceOf(InferenceFailedException.class).hasCause(lost).hasMessage("inference failed:"
                + " cudaMemcpyAsync failed: cudaErrorIllegalAddress (700): an illegal memory access was encountered");
        assertThat(((InferenceFailedException) e).unexpected()).isFalse();
    }

    @Test
    void aBugFailedTheRequestAndItsDetailsStayOutOfTheMessage() {
        IllegalStateException bug = new IllegalStateException("at /secret/path");
        InferenceException e = InferenceException.of(bug);
        assertThat(e).isInstanceOf(InferenceFailedException.class).hasCause(bug)
                .hasMessage("internal error: IllegalStateException");
        assertThat(((InferenceFailedException) e).unexpected()).isTrue();
    }

    private static RequestCancelledException cancelled(RequestCancelledException.Reason reason) {
        return new RequestCancelledException(reason, RequestCancelledException.Stage.QUEUE, "x");
    }
}
