package io.etserve.grpc;

import java.time.Duration;
import java.util.function.Predicate;

/**
 * Which gRPC calls may run on the Netty event loop that read them instead of on a worker
 * ({@link CallOnWorker}).
 *
 * @param quick calls that run at once and briefly ({@code etserve.grpc.inline-below}): run there
 *     whatever else the loop serves
 * @param endsSoon calls that end soon once started, on a CPU or a GPU
 *     ({@code etserve.grpc.inline-alone-below}): run there only when their connection is the
 *     server's only one on that loop, so they hold up no other connection
 * @param bound the longer of the two settings: a call on the loop that takes twice this (and at
 *     least 100 ms) is reported
 */
public record EventLoopCalls(Predicate<Object> quick, Predicate<Object> endsSoon, Duration bound) {

    /** Every call on a worker. */
    public static final EventLoopCalls NONE = new EventLoopCalls(request -> false, request -> false, Duration.ZERO);
}
