package io.etserve.protocol;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import tools.jackson.core.io.NumberOutput;

/**
 * A response's JSON, written as UTF-8 straight into one growing array that becomes the body.
 * The encoder's output is a fixed shape of names, strings and numbers, so this is all it needs;
 * Jackson's generator made a generator, an I/O context and a context object per nesting level
 * for every response. Not thread-safe: one per response.
 *
 * <p>Strings are escaped as RFC 8259 asks (quote, backslash, control characters); other
 * characters are written as UTF-8, except a surrogate without its pair (a request's {@code id}
 * may carry one, written as {@code \ud800} in its JSON), which is written back as the same
 * {@code \\uXXXX} escape, since UTF-8 cannot carry it.
 */
final class JsonBytes {

    /** Java 19 and later write the shortest decimal that reads back as the same float or double. */
    private static final boolean SHORTEST_APPEND = Runtime.version().feature() >= 19;
    /** Number text, one scratch per thread: a response is written start to end on one thread. */
    private static final ThreadLocal<StringBuilder> NUMBER_TEXT = ThreadLocal.withInitial(() -> new StringBuilder(32));
    private static final byte[] HEX = "0123456789abcdef".getBytes(StandardCharsets.US_ASCII);
    /** The largest array the JVM allocates reliably (ByteArrayOutputStream's limit too). */
    private static final int MAX_ARRAY = Integer.MAX_VALUE - 8;
    /** A long's digits and sign, at most. */
    private static final int MAX_LONG_TEXT = 20;

    private byte[] bytes;
    private int size;
    /** This thread's {@link #NUMBER_TEXT}, looked up once per response rather than per number. */
    private StringBuilder numberText;

    JsonBytes(int initialCapacity) {
        bytes = new byte[Math.max(initialCapacity, 64)];
    }

    /** The array written so far; valid from 0 to {@link #size()}. */
    byte[] buffer() {
        return bytes;
    }

    int size() {
        return size;
    }

    /** Structural characters, names and number text, known to be ASCII: {@code ascii("{\"outputs\":[")}. */
    JsonBytes ascii(CharSequence text) {
        int n = text.length();
        ensure(n);
        for (int i = 0; i < n; i++) {
            bytes[size++] = (byte) text.charAt(i);
        }
        return this;
    }

    JsonBytes ascii(char c) {
        ensure(1);
        bytes[size++] = (byte) c;
        return this;
    }

    JsonBytes number(long value) {
        ensure(MAX_LONG_TEXT);
        size = NumberOutput.outputLong(value, bytes, size);
        return this;
    }

    /** An unsigned 64-bit value, which a negative long holds past {@link Long#MAX_VALUE}. */
    JsonBytes unsignedNumber(long value) {
        return value >= 0 ? number(value) : ascii(Long.toUnsignedString(value));
    }

    /** A finite float as the shortest decimal that reads back as it, never widened to double. */
    JsonBytes number(float value) {
        if (!SHORTEST_APPEND) {
            return ascii(NumberOutput.toString(value, true));
        }
        return ascii(numberText().append(value));
    }

    /** A finite double as the shortest decimal that reads back as it. */
    JsonBytes number(double value) {
        if (!SHORTEST_APPEND) {
            return ascii(NumberOutput.toString(value, true));
        }
        return ascii(numberText().append(value));
    }

    private StringBuilder numberText() {
        if (numberText == null) {
            numberText = NUMBER_TEXT.get();
        }
        numberText.setLength(0);
        return numberText;
    }

    /** {@code value} as a JSON string, quoted and escaped. */
    JsonBytes string(String value) {
        int n = value.length();
        ensure(n + 2L);  // enough unless some characters take more than a byte
        bytes[size++] = '"';
        for (int i = 0; i < n; i++) {
            char c = value.charAt(i);
            if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
                ensure(1);
                bytes[size++] = (byte) c;
            } else if (c < 0x80) {
                escapeAscii(c);
            } else if (c < 0x800) {
                ensure(2);
                bytes[size++] = (byte) (0xC0 | (c >> 6));
                bytes[size++] = (byte) (0x80 | (c & 0x3F));
            } else if (!Character.isSurrogate(c)) {
                ensure(3);
                bytes[size++] = (byte) (0xE0 | (c >> 12));
                bytes[size++] = (byte) (0x80 | ((c >> 6) & 0x3F));
                bytes[size++] = (byte) (0x80 | (c & 0x3F));
            } else if (Character.isHighSurrogate(c) && i + 1 < n && Character.isLowSurrogate(value.charAt(i + 1))) {
                int cp = Character.toCodePoint(c, value.charAt(++i));
                ensure(4);
                bytes[size++] = (byte) (0xF0 | (cp >> 18));
                bytes[size++] = (byte) (0x80 | ((cp >> 12) & 0x3F));
                bytes[size++] = (byte) (0x80 | ((cp >> 6) & 0x3F));
                bytes[size++] = (byte) (0x80 | (cp & 0x3F));
            } else {
                unicodeEscape(c);
            }
        }
        ensure(1);
        bytes[size++] = '"';
        return this;
    }

    private void escapeAscii(char c) {
        char shortForm = switch (c) {
            case '"' -> '"';
            case '\\' -> '\\';
            case '\n' -> 'n';
            case '\r' -> 'r';
            case '\t' -> 't';
            case '\b' -> 'b';
            case '\f' -> 'f';
            default -> 0;
        };
        if (shortForm == 0) {
            unicodeEscape(c);
            return;
        }
        ensure(2);
        bytes[size++] = '\\';
        bytes[size++] = (byte) shortForm;
    }

    private void unicodeEscape(char c) {
        ensure(6);
        bytes[size++] = '\\';
        bytes[size++] = 'u';
        bytes[size++] = HEX[(c >> 12) & 0xF];
        bytes[size++] = HEX[(c >> 8) & 0xF];
        bytes[size++] = HEX[(c >> 4) & 0xF];
        bytes[size++] = HEX[c & 0xF];
    }

    /** Room for {@code more} bytes: doubling, up to the largest array a JVM allocates. */
    private void ensure(long more) {
        long needed = size + more;
        if (needed <= bytes.length) {
            return;
        }
        if (needed > MAX_ARRAY) {
            throw new IllegalStateException("the response's JSON would exceed 2 GiB");
        }
        bytes = Arrays.copyOf(bytes, (int) Math.min(MAX_ARRAY, Math.max(needed, 2L * bytes.length)));
    }
}
