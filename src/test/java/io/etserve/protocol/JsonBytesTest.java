package io.etserve.protocol;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import tools.jackson.core.JsonParser;
import tools.jackson.core.JsonToken;
import tools.jackson.core.ObjectReadContext;
import tools.jackson.core.io.NumberOutput;

/** {@link JsonBytes} read back by Jackson's parser, an independent JSON implementation. */
class JsonBytesTest {

    @Test
    void stringsComeBackAsWrittenWhateverTheirCharacters() {
        SplittableRandom random = new SplittableRandom(4);
        String[] pieces = {"a", "\"", "\\", "/", "\n", "\r", "\t", "\b", "\f", "\u0000", "\u001f", "\u007f", "é",
                "\u07ff", "\u0800", "€", "\uffff", "😀", "\ud83d\ude00"};
        for (int i = 0; i < 5_000; i++) {
            StringBuilder s = new StringBuilder();
            for (int k = random.nextInt(12); k > 0; k--) {
                s.append(pieces[random.nextInt(pieces.length)]);
            }
            String value = s.toString();
            assertThat(readString(new JsonBytes(1).string(value))).isEqualTo(value);
        }
    }

    @Test
    void aSurrogateWithoutItsPairIsEscapedAndComesBackTheSame() {
        for (String value : new String[] {"\ud800", "a\udc00b", "\ud83d", "x\ude00\ud83d"}) {
            JsonBytes json = new JsonBytes(1).string(value);
            String text = new String(json.buffer(), 0, json.size(), StandardCharsets.UTF_8);
            assertThat(text).as("pure ASCII escapes").matches("\"[\\x20-\\x7e]*\"");
            assertThat(readString(json)).isEqualTo(value);
        }
    }

    @Test
    void numbersAreTheShortestTextThatReadsBackAsTheSameValue() {
        SplittableRandom random = new SplittableRandom(5);
        for (int i = 0; i < 20_000; i++) {
            float f = Float.intBitsToFloat(random.nextInt());
            if (Float.isFinite(f)) {
                String text = text(new JsonBytes(1).number(f));
                assertThat(Float.parseFloat(text)).as(text).isEqualTo(f);
                assertThat(text.length()).as(text).isLessThanOrEqualTo(NumberOutput.toString(f, true).length());
            }
            double d = Double.longBitsToDouble(random.nextLong());
            if (Double.isFinite(d)) {
                String text = text(new JsonBytes(1).number(d));
                assertThat(Double.parseDouble(text)).as(text).isEqualTo(d);
                assertThat(text.length()).as(text).isLessThanOrEqualTo(NumberOutput.toString(d, true).length());
            }
            long l = random.nextLong();
            assertThat(text(new JsonBytes(1).number(l))).isEqualTo(Long.toString(l));
            assertThat(text(new JsonBytes(1).unsignedNumber(l))).isEqualTo(Long.toUnsignedString(l));
        }
        assertThat(text(new JsonBytes(1).number(Long.MIN_VALUE))).isEqualTo("-9223372036854775808");
        assertThat(text(new JsonBytes(1).number(0.1f))).isEqualTo("0.1");
    }

    @Test
    void growsPastItsFirstCapacity() {
        JsonBytes json = new JsonBytes(1).ascii('[');
        String[] expected = new String[10_000];
        for (int i = 0; i < expected.length; i++) {
            expected[i] = "é" + i;
            json.ascii(i == 0 ? "" : ",").string(expected[i]);
        }
        json.ascii(']');
        try (JsonParser p = ProtocolJson.FACTORY.createParser(ObjectReadContext.empty(), json.buffer(), 0, json.size())) {
            assertThat(p.nextToken()).isEqualTo(JsonToken.START_ARRAY);
            for (String e : expected) {
                assertThat(p.nextToken()).isEqualTo(JsonToken.VALUE_STRING);
                assertThat(p.getString()).isEqualTo(e);
            }
            assertThat(p.nextToken()).isEqualTo(JsonToken.END_ARRAY);
        }
    }

    private static String readString(JsonBytes json) {
        try (JsonParser p = ProtocolJson.FACTORY.createParser(ObjectReadContext.empty(), json.buffer(), 0, json.size())) {
            assertThat(p.nextToken()).as(Arrays.toString(Arrays.copyOf(json.buffer(), json.size())))
                    .isEqualTo(JsonToken.VALUE_STRING);
            String value = p.getString();
            assertThat(p.nextToken()).isNull();
            return value;
        }
    }

    private static String text(JsonBytes json) {
        return new String(json.buffer(), 0, json.size(), StandardCharsets.US_ASCII);
    }
}
