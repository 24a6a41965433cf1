package io.etserve.grpc;

import io.etserve.inference.Caller;
import io.grpc.Context;
import io.grpc.Deadline;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;

/**
 * A gRPC call as the inference path sees its caller: the call's context is cancelled when the
 * client cancels, the connection drops or the deadline passes (grpc-java does that on its own
 * threads), and its deadline bounds the request's waits. Reading either costs nothing; a listener
 * is added only while the request waits.
 */
final class GrpcCaller implements Caller {

    private final Context context;

    /** @param context the call's context ({@code Context.current()} in the service method) */
    GrpcCaller(Context context) {
        this.context = context;
    }

    @Override
    public Watch watch(Runnable gone) {
        Context.CancellationListener listener = cancelled -> gone.run();
        context.addListener(listener, Runnable::run);  // runs at once when already cancelled
        return () -> context.removeListener(listener);
    }

    @Override
    public boolean hasLeft() {
        return context.isCancelled();
    }

    @Override
    public OptionalLong deadlineNanos() {
        Deadline deadline = context.getDeadline();
        return deadline == null ? OptionalLong.empty()
                : OptionalLong.of(System.nanoTime() + deadline.timeRemaining(TimeUnit.NANOSECONDS));
    }
}
