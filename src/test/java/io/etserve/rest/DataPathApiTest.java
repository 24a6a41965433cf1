package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import com.sun.management.ThreadMXBean;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.RawConnection;
import io.etserve.support.TestPaths;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * 4 MiB tensors in and out over the binary extension (y = 2x + 1, XNNPACK): the values are
 * right, and the server allocates no heap array of the tensor's size per request (binary
 * sections and outputs live in pooled direct buffers, written to the connection from there).
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class DataPathApiTest {

    static final int ELEMENTS = 1024 * 1024;
    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-datapath-")
            .copy(TestPaths.testModels(), "affine-4mib");

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
    }

    @LocalServerPort
    int port;

    @Test
    void fourMibInAndOutWithoutAPerRequestHeapArrayOfThatSize() throws Exception {
        byte[] request = binaryRequest();
        var threads = (ThreadMXBean) ManagementFactory.getThreadMXBean();
        try (RawConnection c = RawConnection.open(port, 30_000)) {
            for (int i = 0; i < 5; i++) {  // warm-up: pools fill, the JIT settles
                check(c.send(request).read());
            }
            int calls = 20;
            long before = serverThreadsAllocated(threads);
            for (int i = 0; i < calls; i++) {
                check(c.send(request).read());
            }
            long perCall = (serverThreadsAllocated(threads) - before) / calls;
            System.out.println("server heap allocation per 4 MiB binary round trip: " + perCall + " bytes");
            // The old path allocated the body (4 MiB) and each output (4 MiB) as heap arrays.
            assertThat(perCall).as("heap bytes the server allocated per 4 MiB round trip").isLessThan(ELEMENTS);
        }
    }

    /** Heap bytes allocated by every thread but this one (the client's response arrays are its own). */
    private static long serverThreadsAllocated(ThreadMXBean threads) {
        long self = Thread.currentThread().getId();
        long total = 0;
        for (long id : threads.getAllThreadIds()) {
            if (id != self) {
                total += Math.max(0, threads.getThreadAllocatedBytes(id));
            }
        }
        return total;
    }

    private static byte[] binaryRequest() {
        byte[] json = ("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1," + ELEMENTS
                + "],\"parameters\":{\"binary_data_size\":" + 4 * ELEMENTS + "}}],"
                + "\"outputs\":[{\"name\":\"y\",\"parameters\":{\"binary_data\":true}}]}").getBytes(StandardCharsets.UTF_8);
        ByteBuffer x = ByteBuffer.allocate(4 * ELEMENTS).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < ELEMENTS; i++) {
            x.putFloat(input(i));
        }
        byte[] head = ("POST /v2/models/affine-4mib/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + "Content-Type: application/octet-stream\r\nInference-Header-Content-Length: " + json.length + "\r\n"
                + "Content-Length: " + (json.length + 4 * ELEMENTS) + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII);
        ByteBuffer all = ByteBuffer.allocate(head.length + json.length + 4 * ELEMENTS);
        return all.put(head).put(json).put(x.array()).array();
    }

    /** Exact in FP32, and so is 2x + 1. */
    private static float input(int i) {
        return (i % 4096) * 0.25f - 512f;
    }

    private static void check(RawConnection.Response r) {
        assertThat(r.status()).as(new String(r.body(), 0, Math.min(200, r.body().length), StandardCharsets.UTF_8))
                .isEqualTo(200);
        int jsonLength = Integer.parseInt(r.header("inference-header-content-length"));
        assertThat(r.body().length - jsonLength).isEqualTo(4 * ELEMENTS);
        ByteBuffer y = ByteBuffer.wrap(r.body(), jsonLength, 4 * ELEMENTS).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < ELEMENTS; i++) {
            float want = 2 * input(i) + 1;
            if (y.getFloat() != want) {
                throw new AssertionError("y[" + i + "] is not " + want);
            }
        }
    }
}
