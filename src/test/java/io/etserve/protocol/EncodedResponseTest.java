package io.etserve.protocol;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.inference.DataType;
import io.etserve.inference.InferenceResponse;
import io.etserve.inference.Tensor;
import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.WriteListener;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.OptionalInt;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** How a response body reaches the container's stream: small ones as one write, large sections as they are. */
class EncodedResponseTest {

    /** Records each call: "bytes:N" for array writes, "buffer:N" for ByteBuffer writes. */
    static final class RecordingStream extends ServletOutputStream {
        final List<String> calls = new ArrayList<>();
        final ByteArrayOutputStream all = new ByteArrayOutputStream();

        @Override
        public void write(int b) {
            calls.add("bytes:1");
            all.write(b);
        }

        @Override
        public void write(byte[] b, int off, int len) {
            calls.add("bytes:" + len);
            all.write(b, off, len);
        }

        @Override
        public void write(ByteBuffer buffer) {
            calls.add("buffer:" + buffer.remaining());
            byte[] copy = new byte[buffer.remaining()];
            buffer.get(copy);
            all.write(copy, 0, copy.length);
        }

        @Override
        public boolean isReady() {
            return true;
        }

        @Override
        public void setWriteListener(WriteListener listener) {
        }
    }

    private static EncodedResponse response(int sectionBytes) {
        byte[] json = "{\"outputs\":[]}".getBytes(StandardCharsets.UTF_8);
        ByteBuffer section = ByteBuffer.allocateDirect(sectionBytes);
        for (int i = 0; i < sectionBytes; i++) {
            section.put((byte) i);
        }
        section.flip();
        return new EncodedResponse(json, json.length, List.of(section), OptionalInt.of(json.length),
                EncodedResponse.OCTET_STREAM);
    }

    @Test
    void aSmallBinaryResponseGoesOutAsArrayWritesTheContainerAggregates() throws Exception {
        // Jetty writes a ByteBuffer on its own after flushing the JSON part: two network writes
        // for 16 bytes of tensor data. Array writes land in its buffer, sent once at completion.
        EncodedResponse r = response(16);
        RecordingStream out = new RecordingStream();
        r.writeTo(out);
        assertThat(out.calls).containsExactly("bytes:" + r.jsonLength(), "bytes:16");
        assertThat(out.all.toByteArray()).isEqualTo(expectedBody(16));
    }

    @Test
    void aLargeSectionIsHandedOverAsItsBufferWithoutAHeapCopy() throws Exception {
        EncodedResponse r = response(EncodedResponse.ONE_WRITE_BYTES + 1);
        RecordingStream out = new RecordingStream();
        r.writeTo(out);
        assertThat(out.calls).containsExactly("bytes:" + r.jsonLength(), "buffer:" + (EncodedResponse.ONE_WRITE_BYTES + 1));
        assertThat(out.all.toByteArray()).isEqualTo(expectedBody(EncodedResponse.ONE_WRITE_BYTES + 1));
    }

    /** The expected body, assembled here: the JSON part, then the section's bytes 0, 1, 2, ... */
    private static byte[] expectedBody(int sectionBytes) {
        byte[] json = "{\"outputs\":[]}".getBytes(StandardCharsets.UTF_8);
        byte[] all = new byte[json.length + sectionBytes];
        System.arraycopy(json, 0, all, 0, json.length);
        for (int i = 0; i < sectionBytes; i++) {
            all[json.length + i] = (byte) i;
        }
        return all;
    }

    private static byte[] joined(List<ByteBuffer> buffers) {
        ByteArrayOutputStream all = new ByteArrayOutputStream();
        for (ByteBuffer b : buffers) {
            byte[] copy = new byte[b.remaining()];
            b.get(copy);
            all.write(copy, 0, copy.length);
        }
        return all.toByteArray();
    }

    @Test
    void forABufferSinkASmallBodyIsOneHeapBufferAndALargeSectionItsOwnBuffer() {
        List<ByteBuffer> small = response(16).buffers();
        assertThat(small).hasSize(1);
        assertThat(joined(small)).isEqualTo(expectedBody(16));

        int large = EncodedResponse.ONE_WRITE_BYTES + 1;
        EncodedResponse r = response(large);
        List<ByteBuffer> parts = r.buffers();
        assertThat(parts).hasSize(2);
        assertThat(parts.get(1).isDirect()).as("the section as the bridge left it, not copied").isTrue();
        assertThat(joined(parts)).isEqualTo(expectedBody(large));
        assertThat(joined(r.buffers())).as("the response's own buffers are left as they were").isEqualTo(expectedBody(large));
    }

    @Test
    void aSmallBodyWhoseJsonArrayHasRoomTakesItsSectionsThereWithoutAnotherArray() {
        byte[] json = "{\"outputs\":[]}".getBytes(StandardCharsets.UTF_8);
        byte[] roomy = Arrays.copyOf(json, json.length + 64);
        EncodedResponse fits = new EncodedResponse(roomy, json.length, response(16).binary(), OptionalInt.of(json.length),
                EncodedResponse.OCTET_STREAM);
        List<ByteBuffer> once = fits.buffers();
        assertThat(once).hasSize(1);
        assertThat(once.get(0).array()).as("the JSON's own array").isSameAs(roomy);
        assertThat(joined(once)).isEqualTo(expectedBody(16));
        assertThat(joined(fits.buffers())).as("asked again, the same body").isEqualTo(expectedBody(16));
        assertThat(fits.body()).isEqualTo(expectedBody(16));
    }

    @Test
    void theEncoderLeavesASmallBinaryBodyRoomBehindItsJson() {
        ByteBuffer data = ByteBuffer.allocateDirect(64).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < 16; i++) {
            data.putFloat(i);
        }
        Tensor out = new Tensor("y", DataType.FP32, new long[] {16}, data.flip());
        EncodedResponse r = new InferResponseEncoder().encode(
                new InferenceResponse("m", "1", null, List.of(out), Set.of("y")));
        List<ByteBuffer> body = r.buffers();
        assertThat(body).hasSize(1);
        assertThat(body.get(0).array()).as("no second array for the section").isSameAs(r.json());
        // The body, built here: the protocol's JSON header (its length announced apart), then the
        // 16 floats 0..15 little-endian.
        byte[] joinedBody = joined(body);
        String header = new String(joinedBody, 0, r.jsonLength(), StandardCharsets.UTF_8);
        assertThat(header).isEqualTo("{\"model_name\":\"m\",\"model_version\":\"1\",\"outputs\":[{\"name\":\"y\","
                + "\"datatype\":\"FP32\",\"shape\":[16],\"parameters\":{\"binary_data_size\":64}}]}");
        ByteBuffer floats = ByteBuffer.allocate(64).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < 16; i++) {
            floats.putFloat(i);
        }
        assertThat(Arrays.copyOfRange(joinedBody, r.jsonLength(), joinedBody.length)).isEqualTo(floats.array());
    }
}
