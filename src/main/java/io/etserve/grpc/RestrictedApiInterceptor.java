package io.etserve.grpc;

import io.etserve.security.RestrictedApis;
import io.grpc.BindableService;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.Status;
import java.util.Locale;
import java.util.Optional;

/** Refuses a call to a restricted API group whose metadata lacks its key (PERMISSION_DENIED). */
public final class RestrictedApiInterceptor implements ServerInterceptor {

    private final RestrictedApis restricted;

    private RestrictedApiInterceptor(RestrictedApis restricted) {
        this.restricted = restricted;
    }

    /** {@code service} with the restricted groups checked before each call. */
    public static BindableService guard(BindableService service, RestrictedApis restricted) {
        return () -> ServerInterceptors.intercept(service, new RestrictedApiInterceptor(restricted));
    }

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
            ServerCallHandler<Q, R> next) {
        String method = call.getMethodDescriptor().getBareMethodName();
        Optional<String> refusal = Optional.ofNullable(method).flatMap(RestrictedApis.Group::ofGrpcMethod)
                .flatMap(g -> restricted.refusal(g, restricted.key(g).map(k -> headers.get(
                        Metadata.Key.of(k.header().toLowerCase(Locale.ROOT), Metadata.ASCII_STRING_MARSHALLER)))
                        .orElse(null)));
        if (refusal.isPresent()) {
            call.close(Status.PERMISSION_DENIED.withDescription(refusal.get()), new Metadata());
            return new ServerCall.Listener<>() {};
        }
        return next.startCall(call, headers);
    }
}
