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
    private final boolean mayWait;

    /**
     * @param context the call's context ({@code Context.current()} in the service method)
     * @param mayWait false on Netty's event loop ({@link CallOnWorker#EVENT_LOOP}): the request
     *     then runs only on an instance free now
     */
    GrpcCaller(Context context, boolean mayWait) {
        this.context = context;
        this.mayWait = mayWait;
    }

    @Override
    public boolean mayWait() {
        return mayWait;
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
