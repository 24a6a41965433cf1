package io.etserve.inference;

import java.math.BigInteger;
import java.util.List;
import java.util.Map;

/**
 * The types of the request parameters Triton reserves and this service has no use for beyond
 * checking them: {@code priority} (a whole number, 0 or more), {@code sequence_id} (a whole number
 * or a string) and {@code sequence_start} / {@code sequence_end} (booleans). A string of digits
 * counts as a whole number: gRPC's {@code uint64_param} arrives so. A client that sends
 * them wrongly typed gets the protocol's 400 (gRPC: INVALID_ARGUMENT) naming the parameter,
 * rather than having its mistake ignored. ({@code timeout} is checked where it is used.)
 */
public final class ReservedParameters {

    private static final List<String> FLAGS = List.of("sequence_start", "sequence_end");

    private ReservedParameters() {}

    /** @throws InvalidInputException naming the first wrongly typed one */
    public static void check(Map<String, Object> parameters) {
        if (parameters.isEmpty()) {
            return;  // the usual request
        }
        Object priority = parameters.get("priority");
        if (priority != null && !isWholeNumber(priority)) {
            throw refused("priority", "a whole number (0 or more)", priority);
        }
        Object sequenceId = parameters.get("sequence_id");
        // Any int64: Triton's C++ clients send their uint64 ids through int64_param, so one past
        // 2^63 arrives negative
        if (sequenceId != null && !(sequenceId instanceof String || sequenceId instanceof Long || isWholeNumber(sequenceId))) {
            throw refused("sequence_id", "a whole number or a string", sequenceId);
        }
        for (String flag : FLAGS) {
            Object value = parameters.get(flag);
            if (value != null && !(value instanceof Boolean)) {
                throw refused(flag, "a boolean", value);
            }
        }
    }

    private static boolean isWholeNumber(Object value) {
        return value instanceof Long l && l >= 0
                || value instanceof BigInteger b && b.signum() >= 0
                || value instanceof String s && isDecimalDigits(s);
    }

    /**
     * A whole number as gRPC's {@code uint64_param} arrives: one or more ASCII digits. Not
     * {@link Character#isDigit}, which {@code Long.parseLong} would follow into Arabic-Indic,
     * fullwidth and other scripts' digits: no client sends those for a number.
     */
    public static boolean isDecimalDigits(String s) {
        return !s.isEmpty() && s.chars().allMatch(c -> c >= '0' && c <= '9');
    }

    private static InvalidInputException refused(String name, String what, Object value) {
        String got = value instanceof String text ? "the string '" + UntrustedText.abbreviate(text) + "'"
                : value instanceof Boolean b ? "the boolean " + b
                : "the number " + UntrustedText.abbreviate(String.valueOf(value));
        return new InvalidInputException("the request parameter '" + name + "' must be " + what + ", got " + got);
    }
}
