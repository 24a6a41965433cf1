package io.etserve.rest;

import io.etserve.execution.InferenceService;
import io.etserve.execution.SlowInlineCalls;
import io.etserve.inference.Caller;
import io.etserve.inference.InferenceRequest;
import io.etserve.inference.InflightBytes;
import io.etserve.inference.WouldWaitException;
import io.etserve.metrics.ProtocolMetrics;
import io.etserve.protocol.EncodedResponse;
import io.etserve.protocol.ErrorBody;
import io.etserve.runtime.DirectBufferPool;
import io.etserve.security.RestrictedApis;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.LongAdder;
import org.eclipse.jetty.http.HttpFields;
import org.eclipse.jetty.http.HttpHeader;
import org.eclipse.jetty.io.Content;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;
import org.eclipse.jetty.util.Callback;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.HttpStatus;

/**
 * The usual {@code /infer} request served through Jetty's core API instead of the servlet stack:
 * a POST to a plain model path whose whole body came with its head. {@link InferHandler} asks
 * {@link #target} and serves here what it accepts, on a pool thread or on the selector thread
 * that read it: for a model that will run it at once and briefly ({@link #quick}) while other
 * connections keep the selector busy, the way quick gRPC calls run on Netty's event loop, or for
 * one whose calls end soon ({@link #endsSoon}) when the selector serves no other connection.
 * Everything else (a body still arriving, {@code Expect}, a restricted inference API, tracing)
 * takes the servlet path, whose answers this one matches: the same exchange
 * ({@link InferExchange#decode}, {@link InferExchange#run}), error bodies
 * ({@link ApiExceptionHandler}), request metrics and client watch. Skipping the servlet layer and
 * Spring's filters spares a small request much of its allocation and CPU
 * (bench/results/2026-12-05-2core-core-infer.md).
 */
public final class CoreInference {

    private static final Logger log = LoggerFactory.getLogger(CoreInference.class);

    private final InferExchange exchange;
    private final InferenceService inference;
    private final RestrictedApis restricted;
    private final ProtocolMetrics metrics;
    private final InflightBytes inflight;
    private final DirectBufferPool pool;
    private final long maxBodyBytes;
    private final long maxWholeBytes;
    private final Duration within;
    private final Duration withinAlone;
    private final SlowInlineCalls slowCalls;
    private final LongAdder served = new LongAdder();
    private final LongAdder servedOnSelector = new LongAdder();

    /**
     * @param maxWholeBytes the largest body served here: one read of the connection (Jetty's
     *     request buffer), so a body that came with its head is one chunk
     * @param within a model's recent forward calls under this (its moving average) make its calls
     *     quick enough for a selector other connections keep busy; zero runs none there
     * @param withinAlone the same for a selector that serves only the call's own connection; zero
     *     runs none there
     */
    CoreInference(InferExchange exchange, InferenceService inference, RestrictedApis restricted,
            ProtocolMetrics metrics, InflightBytes inflight, DirectBufferPool pool, long maxBodyBytes,
            long maxWholeBytes, Duration within, Duration withinAlone) {
        this.exchange = exchange;
        this.inference = inference;
        this.restricted = restricted;
        this.metrics = metrics;
        this.inflight = inflight;
        this.pool = pool;
        this.maxBodyBytes = maxBodyBytes;
        this.maxWholeBytes = maxWholeBytes;
        this.within = within;
        this.withinAlone = withinAlone;
        this.slowCalls = new SlowInlineCalls(Math.max(within.toNanos(), withinAlone.toNanos()));
    }

    /**
     * The target of a request to serve here, or null: a POST to a plain model path (what the
     * servlet path serves directly too), media types the protocol's answers fit, a declared length
     * that one read holds, no {@code Expect}, and the inference API not restricted (its key is
     * checked in one place, the servlet filter).
     */
    InferExchange.Target target(Request request) {
        HttpFields headers = request.getHeaders();
        InferExchange.Target target = InferExchange.directTarget(request.getMethod(), request.getHttpURI().getPath(),
                headers.get(HttpHeader.CONTENT_TYPE), headers.get(HttpHeader.ACCEPT),
                headers.get(HttpHeader.CONTENT_ENCODING));
        if (target == null) {
            return null;
        }
        long length = request.getLength();
        if (length <= 0 || length > maxWholeBytes || length > maxBodyBytes || headers.contains(HttpHeader.EXPECT)
                || restricted.restricts(RestrictedApis.Group.INFERENCE)) {
            return null;
        }
        return target;
    }

    /**
     * Whether the selector may run a call to {@code target}: its model would run it at once and
     * briefly ({@link InferenceService#runsAtOnce}), and {@code etserve.http.inline-below} is set.
     */
    boolean quick(InferExchange.Target target) {
        return !within.isZero() && inference.runsAtOnce(target.model(), target.version(), within);
    }

    /**
     * Whether a selector that serves no other connection may run a call to {@code target}: its
     * model's calls end soon once started ({@link InferenceService#endsSoon}, on a CPU or a GPU),
     * and {@code etserve.http.inline-alone-below} is set. The call still runs there only on an
     * instance free at once.
     */
    boolean endsSoon(InferExchange.Target target) {
        return !withinAlone.isZero() && inference.endsSoon(target.model(), target.version(), withinAlone);
    }

    /**
     * Serves a request {@link #target} took, whose whole body is {@code chunk} (released here),
     * and completes {@code callback} once the answer is written.
     *
     * @param onSelector whether this runs on the selector ({@link #quick}, {@link #endsSoon}): the call then runs
     *     only on an instance free now ({@link Caller#AT_ONCE}; none is: the request goes to
     *     {@code handOver} and runs there), nothing watches its client, and one that ran long is reported
     * @param handOver where a request the selector cannot run at once goes (unused off the selector)
     */
    void serve(Request request, Response response, Callback callback, InferExchange.Target target,
            Content.Chunk chunk, boolean onSelector, Executor handOver) {
        long start = System.nanoTime();
        served.increment();
        String headerLength = request.getHeaders().get(InferExchange.HEADER_LENGTH);
        RequestBody body = null;
        try {
            try {
                body = new RequestBody(inflight, pool, maxBodyBytes, request.getLength(),
                        RequestBody.headerLength(headerLength));
                body.readAll(chunk.getByteBuffer());
            } finally {
                chunk.release();
            }
        } catch (Throwable e) {
            refuse(response, e, completion(target, response, callback, body, start));
            return;
        }
        InferenceRequest decoded;
        try {
            decoded = exchange.decode(InferExchange.headerLength(headerLength), body);
        } catch (Throwable e) {
            refuse(response, e, completion(target, response, callback, body, start));
            return;
        }
        if (!onSelector) {
            answer(request, response, callback, target, decoded, body, start, false);
            return;
        }
        if (!answer(request, response, callback, target, decoded, body, start, true)) {
            // Another thread took the instance this one saw idle: run it, decoded already, where
            // waiting is allowed.
            RequestBody read = body;
            try {
                handOver.execute(() -> answer(request, response, callback, target, decoded, read, start, false));
            } catch (RejectedExecutionException e) {
                writeRefusal(response, overloaded(), completion(target, response, callback, read, start));
            }
            return;
        }
        long nanos = System.nanoTime() - start;
        if (slowCalls.report(nanos)) {
            log.warn("a REST inference call ran {} ms on the selector thread that read it, holding the other"
                    + " connections that selector serves or takes on meanwhile, though its model's recent calls were"
                    + " shorter; if a model's time follows its input's values, set etserve.http.inline-below and"
                    + " etserve.http.inline-alone-below to 0", nanos / 1_000_000);
        }
    }

    /**
     * Runs {@code decoded} (whose tensors are in {@code body}) and completes {@code callback} once
     * its answer is written; false (nothing written, nothing completed) when it may not wait and
     * found no instance free.
     */
    private boolean answer(Request request, Response response, Callback callback, InferExchange.Target target,
            InferenceRequest decoded, RequestBody body, long start, boolean onSelector) {
        try {
            // A client that closes its connection while the request waits for an instance or a
            // batch has it dropped, as on the servlet path; on the selector it never waits.
            Caller caller = onSelector ? Caller.AT_ONCE : exchange.caller(() -> channelOf(request));
            EncodedResponse encoded = exchange.run(target.model(), target.version(), decoded, body, caller, start);
            if (onSelector) {
                servedOnSelector.increment();
            }
            write(response, encoded, completion(target, response, callback, body, start));
        } catch (WouldWaitException e) {
            return false;
        } catch (Throwable e) {
            refuse(response, e, completion(target, response, callback, body, start));
        }
        return true;
    }

    /** The request's socket (Jetty's endpoint transport for plain HTTP/1.1), or null. */
    private static SocketChannel channelOf(Request request) {
        return request.getConnectionMetaData().getConnection().getEndPoint().getTransport() instanceof SocketChannel c
                ? c : null;
    }

    /** Requests served here since start. */
    public long served() {
        return served.sum();
    }

    /** Of {@link #served}, those run on the selector thread that read them. */
    public long servedOnSelector() {
        return servedOnSelector.sum();
    }

    /**
     * Gives the body's buffers back (null: none was made) and counts the call once its answer is
     * written or failed.
     */
    private Callback completion(InferExchange.Target target, Response response, Callback callback, RequestBody body,
            long start) {
        Runnable end = () -> {
            if (body != null) {
                body.close();
            }
            metrics.record("rest", target.model(), response.getStatus(), System.nanoTime() - start);
        };
        return Callback.from(() -> {
            end.run();
            callback.succeeded();
        }, x -> {
            end.run();
            callback.failed(x);
        });
    }

    /**
     * The answer as the servlet path writes it: status, Content-Type, the binary extension's
     * header, Content-Length, then the body's buffers in order ({@link EncodedResponse#buffers}).
     */
    private static void write(Response response, EncodedResponse encoded, Callback done) {
        response.setStatus(200);
        HttpFields.Mutable headers = response.getHeaders();
        headers.put(HttpHeader.CONTENT_TYPE, encoded.contentType());
        encoded.inferenceHeaderContentLength().ifPresent(n -> headers.put(InferExchange.HEADER_LENGTH, n));
        headers.put(HttpHeader.CONTENT_LENGTH, encoded.contentLength());
        writeFrom(response, encoded.buffers(), 0, done);
    }

    private static void writeFrom(Response response, List<ByteBuffer> parts, int i, Callback done) {
        boolean last = i == parts.size() - 1;
        response.write(last, parts.get(i),
                last ? done : Callback.from(() -> writeFrom(response, parts, i + 1, done), done::failed));
    }

    /** A failure in the protocol's error body, as {@link ApiExceptionHandler} answers it on the servlet path. */
    private void refuse(Response response, Throwable e, Callback done) {
        if (response.isCommitted()) {
            done.failed(e);
            return;
        }
        writeRefusal(response, exchange.errors().answerOf(e), done);
    }

    /**
     * A full request pool's 503 for a request to {@code target} refused before it came here
     * ({@link InferHandler}), counted in the REST metrics as one refused here is.
     */
    void refuseOverloaded(InferExchange.Target target, Response response, Callback callback) {
        writeRefusal(response, overloaded(), completion(target, response, callback, null, System.nanoTime()));
    }

    /**
     * A full request pool's answer, the same wherever the request was refused (here, or by
     * {@link InferHandler} before it came here): 503, the protocol's error body, Retry-After.
     */
    static ApiExceptionHandler.Answer overloaded() {
        return new ApiExceptionHandler.Answer(HttpStatus.SERVICE_UNAVAILABLE.value(), "server is overloaded",
                Duration.ofSeconds(1));
    }

    /** {@code answer} in the protocol's error body through Jetty's core API. */
    static void writeRefusal(Response response, ApiExceptionHandler.Answer answer, Callback done) {
        byte[] json = ErrorBody.error(answer.text());
        response.setStatus(answer.status());
        HttpFields.Mutable headers = response.getHeaders();
        headers.put(HttpHeader.CONTENT_TYPE, EncodedResponse.JSON);
        if (answer.retryAfter() != null) {
            headers.put(HttpHeader.RETRY_AFTER, ApiException.retryAfterHeader(answer.retryAfter()));
        }
        headers.put(HttpHeader.CONTENT_LENGTH, json.length);
        response.write(true, ByteBuffer.wrap(json), done);
    }
}
