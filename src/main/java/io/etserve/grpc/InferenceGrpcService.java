package io.etserve.grpc;

import io.etserve.execution.InferenceService;
import io.etserve.grpc.protocol.CudaSharedMemoryRegisterRequest;
import io.etserve.grpc.protocol.CudaSharedMemoryRegisterResponse;
import io.etserve.grpc.protocol.CudaSharedMemoryStatusRequest;
import io.etserve.grpc.protocol.CudaSharedMemoryStatusResponse;
import io.etserve.grpc.protocol.CudaSharedMemoryUnregisterRequest;
import io.etserve.grpc.protocol.CudaSharedMemoryUnregisterResponse;
import io.etserve.grpc.protocol.GRPCInferenceServiceGrpc;
import io.etserve.grpc.protocol.ModelConfigRequest;
import io.etserve.grpc.protocol.ModelConfigResponse;
import io.etserve.grpc.protocol.ModelInferRequest;
import io.etserve.grpc.protocol.ModelInferResponse;
import io.etserve.grpc.protocol.ModelMetadataRequest;
import io.etserve.grpc.protocol.ModelMetadataResponse;
import io.etserve.grpc.protocol.ModelReadyRequest;
import io.etserve.grpc.protocol.ModelReadyResponse;
import io.etserve.grpc.protocol.ModelRepositoryParameter;
import io.etserve.grpc.protocol.ModelStatisticsRequest;
import io.etserve.grpc.protocol.ModelStatisticsResponse;
import io.etserve.grpc.protocol.ModelStreamInferResponse;
import io.etserve.grpc.protocol.RepositoryIndexRequest;
import io.etserve.grpc.protocol.RepositoryIndexResponse;
import io.etserve.grpc.protocol.RepositoryModelLoadRequest;
import io.etserve.grpc.protocol.RepositoryModelLoadResponse;
import io.etserve.grpc.protocol.RepositoryModelUnloadRequest;
import io.etserve.grpc.protocol.RepositoryModelUnloadResponse;
import io.etserve.grpc.protocol.ServerLiveRequest;
import io.etserve.grpc.protocol.ServerLiveResponse;
import io.etserve.grpc.protocol.ServerMetadataRequest;
import io.etserve.grpc.protocol.ServerMetadataResponse;
import io.etserve.grpc.protocol.ServerReadyRequest;
import io.etserve.grpc.protocol.ServerReadyResponse;
import io.etserve.grpc.protocol.SystemSharedMemoryRegisterRequest;
import io.etserve.grpc.protocol.SystemSharedMemoryRegisterResponse;
import io.etserve.grpc.protocol.SystemSharedMemoryStatusRequest;
import io.etserve.grpc.protocol.SystemSharedMemoryStatusResponse;
import io.etserve.grpc.protocol.SystemSharedMemoryUnregisterRequest;
import io.etserve.grpc.protocol.SystemSharedMemoryUnregisterResponse;
import io.etserve.health.ProbeHealth;
import io.etserve.health.ServerReadiness;
import io.etserve.inference.InferenceRequest;
import io.etserve.inference.InferenceResponse;
import io.etserve.inference.InflightBytes;
import io.etserve.inference.InvalidInputException;
import io.etserve.inference.ModelDescription;
import io.etserve.inference.ModelNotFoundException;
import io.etserve.inference.TensorMetadata;
import io.etserve.inference.WouldWaitException;
import io.etserve.metrics.ProtocolMetrics;
import io.etserve.protocol.DecodeLimits;
import io.etserve.protocol.PublicMessages;
import io.etserve.repository.ModelRegistry;
import io.etserve.repository.ModelVersionState;
import io.etserve.repository.RepositoryControl;
import io.etserve.runtime.BufferLease;
import io.etserve.runtime.DirectBufferPool;
import io.etserve.sharedmemory.SharedMemoryRegions;
import io.etserve.triton.TritonExtensions;
import io.grpc.Context;
import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.List;
import java.util.function.IntFunction;
import java.util.function.Predicate;
import java.util.function.Supplier;

/**
 * The protocol's {@code inference.GRPCInferenceService}: the same registry, readiness and
 * {@link InferenceService} as the REST controller, so limits, admission, batching, metrics and
 * errors are the same whichever way a request comes.
 */
public final class InferenceGrpcService extends GRPCInferenceServiceGrpc.GRPCInferenceServiceImplBase {

    private final ModelRegistry registry;
    private final InferenceService inference;
    private final ServerReadiness readiness;
    private final ProbeHealth probes;
    private final GrpcTensors tensors;
    private final GrpcStatuses statuses;
    private final String version;
    private final List<String> extensions;
    private final ProtocolMetrics metrics;
    private final RepositoryControl repository;
    private final PublicMessages messages;
    private final TritonExtensions triton;
    private final DirectBufferPool tensorBuffers;
    private final InPlaceRequests inPlace;
    private final SharedMemoryRegions sharedMemory;
    private final InflightBytes inflight;

    /**
     * @param inPlace how the server holds the buffers of ModelInfer requests parsed in place
     * @param sharedMemory the shared-memory regions, system and CUDA, REST's too
     * @param inflight the in-flight byte budget, which inputs read from shared memory count in
     *     (messages are counted by {@link InflightMessages})
     */
    public InferenceGrpcService(ModelRegistry registry, InferenceService inference, ServerReadiness readiness,
            ProbeHealth probes, DecodeLimits limits, PublicMessages messages, String version, List<String> extensions,
            ProtocolMetrics metrics, RepositoryControl repository, TritonExtensions triton,
            DirectBufferPool tensorBuffers, InPlaceRequests inPlace, SharedMemoryRegions sharedMemory,
            InflightBytes inflight) {
        this.registry = registry;
        this.inference = inference;
        this.readiness = readiness;
        this.probes = probes;
        this.tensors = new GrpcTensors(limits, sharedMemory);
        this.statuses = new GrpcStatuses(messages);
        this.version = version;
        this.extensions = List.copyOf(extensions);
        this.metrics = metrics;
        this.repository = repository;
        this.messages = messages;
        this.triton = triton;
        this.tensorBuffers = tensorBuffers;
        this.inPlace = inPlace;
        this.sharedMemory = sharedMemory;
        this.inflight = inflight;
    }

    /** Every region, or the one named (NOT_FOUND when it is not registered), by name as Triton's. */
    @Override
    public void systemSharedMemoryStatus(SystemSharedMemoryStatusRequest request,
            StreamObserver<SystemSharedMemoryStatusResponse> out) {
        answer(out, () -> {
            List<SharedMemoryRegions.Status> regions;
            try {
                regions = request.getName().isEmpty() ? sharedMemory.status() : List.of(sharedMemory.status(request.getName()));
            } catch (SharedMemoryRegions.UnknownRegionException e) {
                throw Status.NOT_FOUND.withDescription(e.getMessage()).asRuntimeException();
            }
            SystemSharedMemoryStatusResponse.Builder b = SystemSharedMemoryStatusResponse.newBuilder();
            for (SharedMemoryRegions.Status r : regions) {
                b.putRegions(r.name(), SystemSharedMemoryStatusResponse.RegionStatus.newBuilder().setName(r.name())
                        .setKey(r.key()).setOffset(r.offset()).setByteSize(r.byteSize()).build());
            }
            return b.build();
        });
    }

    /** UNIMPLEMENTED while registration is off (as Triton's without --allow-client-shm). */
    @Override
    public void systemSharedMemoryRegister(SystemSharedMemoryRegisterRequest request,
            StreamObserver<SystemSharedMemoryRegisterResponse> out) {
        answer(out, () -> {
            if (!sharedMemory.registrationEnabled()) {
                // Whatever the request holds, as REST answers.
                throw Status.UNIMPLEMENTED.withDescription(SharedMemoryRegions.REGISTRATION_OFF).asRuntimeException();
            }
            if (request.getOffset() < 0 || request.getByteSize() < 0) {
                throw new InvalidInputException("A shared memory region's offset and byte_size must be below 2^63.");
            }
            sharedMemory.register(request.getName(), request.getKey(), request.getOffset(), request.getByteSize());
            return SystemSharedMemoryRegisterResponse.getDefaultInstance();
        });
    }

    /** Every CUDA region, or the one named (NOT_FOUND when it is not registered), by name as Triton's. */
    @Override
    public void cudaSharedMemoryStatus(CudaSharedMemoryStatusRequest request,
            StreamObserver<CudaSharedMemoryStatusResponse> out) {
        answer(out, () -> {
            List<SharedMemoryRegions.CudaStatus> regions;
            try {
                regions = request.getName().isEmpty() ? sharedMemory.cudaStatus()
                        : List.of(sharedMemory.cudaStatus(request.getName()));
            } catch (SharedMemoryRegions.UnknownRegionException e) {
                throw Status.NOT_FOUND.withDescription(e.getMessage()).asRuntimeException();
            }
            CudaSharedMemoryStatusResponse.Builder b = CudaSharedMemoryStatusResponse.newBuilder();
            for (SharedMemoryRegions.CudaStatus r : regions) {
                b.putRegions(r.name(), CudaSharedMemoryStatusResponse.RegionStatus.newBuilder().setName(r.name())
                        .setDeviceId(r.deviceId()).setByteSize(r.byteSize()).build());
            }
            return b.build();
        });
    }

    /** UNIMPLEMENTED while registration is off, and on a host without a CUDA device. */
    @Override
    public void cudaSharedMemoryRegister(CudaSharedMemoryRegisterRequest request,
            StreamObserver<CudaSharedMemoryRegisterResponse> out) {
        answer(out, () -> {
            try {
                // Off and no device are refused first, whatever the request holds. byte_size is a uint64:
                // one past 2^63 - 1 reads as negative, which registerCuda refuses as such.
                sharedMemory.registerCuda(request.getName(), request.getRawHandle().toByteArray(),
                        request.getDeviceId(), request.getByteSize());
            } catch (SharedMemoryRegions.RegistrationOffException | SharedMemoryRegions.NoCudaException e) {
                throw Status.UNIMPLEMENTED.withDescription(e.getMessage()).asRuntimeException();
            }
            return CudaSharedMemoryRegisterResponse.getDefaultInstance();
        });
    }

    /** The CUDA region named, or every CUDA region when no name is given; a name not registered is no error. */
    @Override
    public void cudaSharedMemoryUnregister(CudaSharedMemoryUnregisterRequest request,
            StreamObserver<CudaSharedMemoryUnregisterResponse> out) {
        answer(out, () -> {
            if (request.getName().isEmpty()) {
                sharedMemory.unregisterAllCuda();
            } else {
                sharedMemory.unregisterCuda(request.getName());
            }
            return CudaSharedMemoryUnregisterResponse.getDefaultInstance();
        });
    }

    /** The system region named, or every system region when no name is given; a name not registered is no error. */
    @Override
    public void systemSharedMemoryUnregister(SystemSharedMemoryUnregisterRequest request,
            StreamObserver<SystemSharedMemoryUnregisterResponse> out) {
        answer(out, () -> {
            if (request.getName().isEmpty()) {
                sharedMemory.unregisterAll();
            } else {
                sharedMemory.unregister(request.getName());
            }
            return SystemSharedMemoryUnregisterResponse.getDefaultInstance();
        });
    }

    @Override
    public void repositoryIndex(RepositoryIndexRequest request, StreamObserver<RepositoryIndexResponse> out) {
        answer(out, () -> {
            RepositoryIndexResponse.Builder b = RepositoryIndexResponse.newBuilder();
            for (RepositoryControl.IndexRow r : repository.index(request.getReady())) {
                b.addModelsBuilder().setName(r.name()).setVersion(r.version()).setState(r.state())
                        .setReason(r.reason() == null ? "" : messages.redact(r.reason()));
            }
            return b.build();
        });
    }

    @Override
    public void repositoryModelLoad(RepositoryModelLoadRequest request, StreamObserver<RepositoryModelLoadResponse> out) {
        answer(out, () -> {
            TritonExtensions.checkParameterNames(request.getParametersMap().keySet());
            ModelRepositoryParameter config = request.getParametersMap().get("config");
            if (config != null && config.getParameterChoiceCase() != ModelRepositoryParameter.ParameterChoiceCase.STRING_PARAM) {
                throw new RepositoryControl.RefusedException("the load request's config parameter must be a"
                        + " string_param holding the model configuration as JSON");
            }
            triton.load(request.getModelName(), config == null ? null : config.getStringParam());
            return RepositoryModelLoadResponse.getDefaultInstance();
        });
    }

    @Override
    public void modelConfig(ModelConfigRequest request, StreamObserver<ModelConfigResponse> out) {
        answer(out, () -> ModelConfigResponse.newBuilder()
                .setConfig(triton.config(request.getName(), emptyToNull(request.getVersion()))).build());
    }

    @Override
    public void modelStatistics(ModelStatisticsRequest request, StreamObserver<ModelStatisticsResponse> out) {
        answer(out, () -> triton.statistics(request.getName(), request.getVersion()));
    }

    @Override
    public void repositoryModelUnload(RepositoryModelUnloadRequest request,
            StreamObserver<RepositoryModelUnloadResponse> out) {
        answer(out, () -> {
            repository.unload(request.getModelName());
            return RepositoryModelUnloadResponse.getDefaultInstance();
        });
    }

    @Override
    public void serverLive(ServerLiveRequest request, StreamObserver<ServerLiveResponse> out) {
        answer(out, () -> ServerLiveResponse.newBuilder().setLive(probes.liveness() == 200).build());
    }

    @Override
    public void serverReady(ServerReadyRequest request, StreamObserver<ServerReadyResponse> out) {
        answer(out, () -> ServerReadyResponse.newBuilder().setReady(probes.readiness() == 200).build());
    }

    /** An unknown model or version is not ready, not an error: Triton answers so, and its clients expect it. */
    @Override
    public void modelReady(ModelReadyRequest request, StreamObserver<ModelReadyResponse> out) {
        answer(out, () -> {
            boolean ready;
            try {
                ModelVersionState state = registry.resolve(request.getName(), emptyToNull(request.getVersion()));
                ready = state.whyNotServing(inference).or(readiness::whyNotReady).isEmpty();
            } catch (ModelNotFoundException unknown) {
                ready = false;
            }
            return ModelReadyResponse.newBuilder().setReady(ready).build();
        });
    }

    @Override
    public void serverMetadata(ServerMetadataRequest request, StreamObserver<ServerMetadataResponse> out) {
        answer(out, () -> ServerMetadataResponse.newBuilder().setName("etserve").setVersion(version)
                .addAllExtensions(extensions).build());
    }

    @Override
    public void modelMetadata(ModelMetadataRequest request, StreamObserver<ModelMetadataResponse> out) {
        answer(out, () -> {
            ModelDescription model = registry.describe(request.getName(), emptyToNull(request.getVersion()));
            ModelMetadataResponse.Builder b = ModelMetadataResponse.newBuilder().setName(model.name())
                    .addAllVersions(registry.versions(model.name())).setPlatform("executorch");
            model.inputs().forEach(t -> b.addInputs(describe(t)));
            model.outputs().forEach(t -> b.addOutputs(describe(t)));
            return b.build();
        });
    }

    @Override
    public void modelInfer(ModelInferRequest request, StreamObserver<ModelInferResponse> out) {
        long start = System.nanoTime();
        StreamObserver<ModelInferResponse> counted = new StreamObserver<>() {
            @Override
            public void onNext(ModelInferResponse value) {
                out.onNext(value);
            }

            @Override
            public void onError(Throwable t) {
                metrics.record("grpc", request.getModelName(), Status.fromThrowable(t).getCode().name(),
                        System.nanoTime() - start);
                out.onError(t);
            }

            @Override
            public void onCompleted() {
                metrics.record("grpc", request.getModelName(), "OK", System.nanoTime() - start);
                out.onCompleted();
            }
        };
        BufferLease buffers = new BufferLease(tensorBuffers);
        InferenceRequest decoded;
        // A request parsed in place is read here, into the call's buffers, and not after.
        try (InPlaceRequests.Taken read = inPlace.take(request)) {
            var refused = readiness.whyNotAccepting();
            if (refused.isPresent()) {
                throw statuses.status(Status.UNAVAILABLE, "server is not ready: " + refused.get(), Duration.ofSeconds(1));
            }
            decoded = tensors.decode(request, buffers, sharedMemoryBuffers(buffers));
        } catch (RuntimeException e) {
            buffers.close();
            counted.onError(statuses.of(e));
            return;
        }
        infer(request, decoded, buffers, counted, CallOnWorker.EVENT_LOOP.get(), start);
    }

    /**
     * Triton's streaming extension: each request on the stream runs as a ModelInfer call would,
     * one at a time and in order (the next is read once the one before is answered), and is
     * answered on the stream with its response or, when it failed, its error message (beside the
     * request's id in {@code infer_response}, as Triton's); a failure
     * does not end the stream. Each runs on a worker, never on the event loop ({@link CallOnWorker}).
     */
    @Override
    public StreamObserver<ModelInferRequest> modelStreamInfer(StreamObserver<ModelStreamInferResponse> out) {
        if (out instanceof ServerCallStreamObserver<ModelStreamInferResponse> call) {
            // A client that left: its request in flight is dropped (its context is cancelled), and
            // an answer written after is let go instead of thrown.
            call.setOnCancelHandler(() -> {});
        }
        return new StreamObserver<>() {
            @Override
            public void onNext(ModelInferRequest request) {
                modelInfer(request, new StreamObserver<>() {
                    @Override
                    public void onNext(ModelInferResponse answer) {
                        out.onNext(ModelStreamInferResponse.newBuilder().setInferResponse(answer).build());
                    }

                    @Override
                    public void onError(Throwable failure) {
                        // With the request's id, as Triton's: a client that matches answers to
                        // requests by id learns which one failed.
                        Status status = Status.fromThrowable(failure);
                        out.onNext(ModelStreamInferResponse.newBuilder().setErrorMessage(
                                status.getDescription() != null ? status.getDescription() : status.getCode().name())
                                .setInferResponse(ModelInferResponse.newBuilder().setId(request.getId())).build());
                    }

                    @Override
                    public void onCompleted() {
                        // one request's end; the stream ends when the client's does
                    }
                });
            }

            @Override
            public void onError(Throwable t) {
                // the client cancelled or the stream broke: nothing left to answer
            }

            @Override
            public void onCompleted() {
                out.onCompleted();
            }
        };
    }

    /**
     * Buffers of {@code buffers} for inputs read from shared memory, their bytes reserved in the
     * in-flight budget (RESOURCE_EXHAUSTED when it is spent) until the buffers go back.
     */
    private IntFunction<ByteBuffer> sharedMemoryBuffers(BufferLease buffers) {
        return bytes -> {
            InflightBytes.Reservation held = inflight.open();
            buffers.closeWith(held);
            held.grow(bytes);
            return buffers.acquire(bytes);
        };
    }

    /**
     * Runs a decoded request, answers it and gives its buffers back. On the event loop
     * ({@code handOver} not null) it runs only on an instance free now; none is, and the rest
     * goes to a worker, where it may wait.
     */
    private void infer(ModelInferRequest request, InferenceRequest decoded, BufferLease buffers,
            StreamObserver<ModelInferResponse> out, CallOnWorker.HandOver handOver, long arrivedNanos) {
        try {
            ModelInferResponse answer;
            try {
                InferenceResponse response = inference.infer(request.getModelName(),
                        emptyToNull(request.getModelVersion()), decoded, buffers,
                        new GrpcCaller(Context.current(), handOver == null), arrivedNanos);
                try (var span = inference.spans().encode(response.modelName(), "grpc")) {
                    answer = GrpcTensors.encode(response);
                }
            } catch (WouldWaitException e) {
                if (handOver == null) {
                    throw e;  // only a call that may not wait is refused so
                }
                BufferLease kept = buffers;
                buffers = null;  // the worker's now, or refused's
                Runnable onWorker = () -> infer(request, decoded, kept, out, null, arrivedNanos);
                handOver.toWorker(inference.spans().carry(onWorker), status -> {
                    kept.close();
                    out.onError(status.asRuntimeException());
                });
                return;
            } catch (RuntimeException e) {
                out.onError(statuses.of(e));
                return;
            }
            // Netty's transport (the only one this server runs) serializes the message inside
            // onNext: the outputs' buffers are read here, and may go back to the pool after.
            out.onNext(answer);
            out.onCompleted();
        } finally {
            if (buffers != null) {
                buffers.close();
            }
        }
    }

    /**
     * Which calls may run on the event loop that read them ({@link CallOnWorker}): an inference
     * whose model would run it at once and briefly ({@link InferenceService#runsAtOnce}, under
     * {@code quickWithin}), and, on a loop that serves only its connection, one whose model's
     * calls end soon once started ({@link InferenceService#endsSoon}, under {@code aloneWithin}; a
     * GPU model's too). Zero turns either off.
     */
    public EventLoopCalls eventLoopCalls(Duration quickWithin, Duration aloneWithin) {
        Predicate<Object> quick = quickWithin.isZero() ? request -> false
                : request -> request instanceof ModelInferRequest r
                        && inference.runsAtOnce(r.getModelName(), emptyToNull(r.getModelVersion()), quickWithin);
        Predicate<Object> endsSoon = aloneWithin.isZero() ? request -> false
                : request -> request instanceof ModelInferRequest r
                        && inference.endsSoon(r.getModelName(), emptyToNull(r.getModelVersion()), aloneWithin);
        return new EventLoopCalls(quick, endsSoon, quickWithin.compareTo(aloneWithin) >= 0 ? quickWithin : aloneWithin);
    }

    private <T> void answer(StreamObserver<T> out, Supplier<T> call) {
        T response;
        try {
            response = call.get();
        } catch (RuntimeException e) {
            out.onError(statuses.of(e));
            return;
        }
        out.onNext(response);
        out.onCompleted();
    }

    private static ModelMetadataResponse.TensorMetadata describe(TensorMetadata t) {
        ModelMetadataResponse.TensorMetadata.Builder b = ModelMetadataResponse.TensorMetadata.newBuilder()
                .setName(t.name()).setDatatype(t.dataType().protocolName());
        for (long d : t.shape()) {
            b.addShape(d);
        }
        return b.build();
    }

    private static String emptyToNull(String version) {
        return version == null || version.isEmpty() ? null : version;
    }
}
