package io.etserve.cuda;

import io.etserve.runtime.StreamSelection;
import java.time.Duration;
import java.util.List;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.cuda.global.cudart;

/** Real CUDA streams through JavaCPP: non-blocking, with the configured priority. */
public final class CudaStreamFactory implements StreamFactory {

    private final CudaRuntime runtime;
    private final StreamSelection.CompletionWait completionWait;
    private final int sleepSliceMicros;
    private final int waitTimeoutMillis;

    public CudaStreamFactory(CudaRuntime runtime, StreamSelection.CompletionWait completionWait) {
        this(runtime, completionWait, Duration.ZERO);
    }

    public CudaStreamFactory(CudaRuntime runtime, StreamSelection.CompletionWait completionWait,
            Duration sleepSlice) {
        this(runtime, completionWait, sleepSlice, Duration.ZERO);
    }

    /**
     * @param sleepSlice the adaptive wait's longest single sleep (zero: one sleep), whole microseconds
     * @param waitTimeout how long the adaptive wait waits for a call's GPU work before the device
     *     is taken as hung (zero: no limit), whole milliseconds
     */
    public CudaStreamFactory(CudaRuntime runtime, StreamSelection.CompletionWait completionWait,
            Duration sleepSlice, Duration waitTimeout) {
        if (!runtime.available()) {
            throw new IllegalArgumentException("CUDA unavailable: " + runtime.unavailableReason().orElse("?"));
        }
        this.runtime = runtime;
        this.completionWait = completionWait;
        this.sleepSliceMicros = StreamSelection.sleepSliceMicros(sleepSlice);
        this.waitTimeoutMillis = StreamSelection.waitTimeoutMillis(waitTimeout);
    }

    private record CudaStream(int device, CUstream_st stream) implements ComputeStream {
        @Override
        public long handle() {
            return stream.address();
        }
    }

    @Override
    public List<Integer> devices() {
        return runtime.devices().stream().map(CudaRuntime.Device::ordinal).toList();
    }

    @Override
    public ComputeStream create(int device, int priority) {
        synchronized (CudaRuntime.class) {
            CudaRuntime.check("cudaSetDevice", cudart.cudaSetDevice(device));
            CUstream_st stream = new CUstream_st();
            // Non-blocking: never implicitly ordered after the legacy default stream.
            CudaRuntime.check("cudaStreamCreateWithPriority",
                    cudart.cudaStreamCreateWithPriority(stream, cudart.cudaStreamNonBlocking, priority));
            return new CudaStream(device, stream);
        }
    }

    @Override
    public void synchronize(ComputeStream stream) {
        CudaRuntime.check("cudaStreamSynchronize", cudart.cudaStreamSynchronize(((CudaStream) stream).stream()));
    }

    @Override
    public void destroy(ComputeStream stream) {
        CudaRuntime.check("cudaStreamDestroy", cudart.cudaStreamDestroy(((CudaStream) stream).stream()));
    }

    @Override
    public StreamSelection.Mode selectionMode() {
        return StreamSelection.Mode.CUDA;
    }

    @Override
    public StreamSelection.CompletionWait completionWait() {
        return completionWait;
    }

    @Override
    public int sleepSliceMicros() {
        return sleepSliceMicros;
    }

    @Override
    public int waitTimeoutMillis() {
        return waitTimeoutMillis;
    }
}
