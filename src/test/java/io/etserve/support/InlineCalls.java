package io.etserve.support;

import org.springframework.test.context.DynamicPropertyRegistry;

/**
 * Settings for tests whose calls must not run where they were read: the probe's time follows its
 * input, so after quick calls a held or slow one would run on a REST selector or a gRPC event
 * loop and hold every connection that shares it.
 */
public final class InlineCalls {

    private InlineCalls() {}

    /** Every REST call on a request thread: {@code etserve.http.inline-below} and {@code inline-alone-below} 0. */
    public static void offForRest(DynamicPropertyRegistry r) {
        r.add("etserve.http.inline-below", () -> "0");
        r.add("etserve.http.inline-alone-below", () -> "0");
    }

    /** As {@link #offForRest}, and every gRPC call on a worker ({@code etserve.grpc.inline-below} 0). */
    public static void off(DynamicPropertyRegistry r) {
        offForRest(r);
        r.add("etserve.grpc.inline-below", () -> "0");
    }
}
