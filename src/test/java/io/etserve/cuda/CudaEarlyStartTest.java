package io.etserve.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.springframework.mock.env.MockEnvironment;

class CudaEarlyStartTest {

    private static final CudaRuntime UP = new CudaRuntime(true, null, 13000, 13000,
            List.of(new CudaRuntime.Device(0, "a GPU", 9, 0, 1L << 34, "GPU-0")));
    private static final TensorRtProbe TRT = new TensorRtProbe(true, "10.9.0", null);

    @Test
    void startsUnlessCudaOrTheEarlyStartIsTurnedOff() {
        assertThat(CudaEarlyStart.wanted(new MockEnvironment())).isTrue();
        assertThat(CudaEarlyStart.wanted(new MockEnvironment().withProperty("etserve.cuda.enabled", "true"))).isTrue();
        assertThat(CudaEarlyStart.wanted(new MockEnvironment().withProperty("etserve.cuda.enabled", "FALSE")))
                .isFalse();
        assertThat(CudaEarlyStart.wanted(new MockEnvironment().withProperty("etserve.cuda.early-start", "false")))
                .isFalse();
    }

    @Test
    void probesTensorRtAfterCudaOnTheSameThreadWhereCudaIsUp() {
        CudaEarlyStart.Run run = new CudaEarlyStart.Run();
        AtomicReference<Thread> cudaThread = new AtomicReference<>();
        AtomicReference<Thread> probeThread = new AtomicReference<>();
        AtomicReference<CudaRuntime> probedWith = new AtomicReference<>();
        run.run(() -> {
            cudaThread.set(Thread.currentThread());
            assertThat(run.tensorRt).isNotDone();
            return UP;
        }, cuda -> {
            probeThread.set(Thread.currentThread());
            probedWith.set(cuda);
            assertThat(run.cuda).isCompletedWithValue(UP);  // CUDA's result is out before the probe starts
            return TRT;
        });
        assertThat(run.cuda).isCompletedWithValue(UP);
        assertThat(run.tensorRt).isCompletedWithValue(TRT);
        assertThat(probeThread.get()).isSameAs(cudaThread.get());
        assertThat(probedWith.get()).isSameAs(UP);
    }

    @Test
    void leavesTensorRtUnprobedWithoutCuda() {
        CudaEarlyStart.Run unavailable = new CudaEarlyStart.Run();
        unavailable.run(() -> CudaRuntime.unavailable("no driver"), cuda -> {
            throw new AssertionError("probed without CUDA");
        });
        assertThat(unavailable.cuda.join().available()).isFalse();
        assertThat(unavailable.tensorRt).isCompletedWithValue(null);

        CudaEarlyStart.Run failed = new CudaEarlyStart.Run();
        failed.run(() -> {
            throw new UnsatisfiedLinkError("no libcudart");
        }, cuda -> {
            throw new AssertionError("probed without CUDA");
        });
        assertThat(failed.cuda).isCompletedExceptionally();
        assertThat(failed.tensorRt).isCompletedWithValue(null);
    }

    @Test
    void aProbeThatThrowsEndsTheRunAndLeavesCudasResult() {
        CudaEarlyStart.Run run = new CudaEarlyStart.Run();
        run.run(() -> UP, cuda -> {
            throw new NoClassDefFoundError("org/bytedeco/tensorrt/global/nvinfer");
        });
        assertThat(run.cuda).isCompletedWithValue(UP);
        assertThat(run.tensorRt).isCompletedExceptionally();
        assertThat(run.tensorRt.exceptionally(e -> null).join()).isNull();
        try {
            run.tensorRt.join();
        } catch (CompletionException expected) {
            assertThat(expected).hasCauseInstanceOf(NoClassDefFoundError.class);
        }
    }
}
