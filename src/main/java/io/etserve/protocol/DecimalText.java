package io.etserve.protocol;

/**
 * JSON number text to the nearest float or double without allocating, for the numbers clients
 * usually send; anything else answers NaN (which no JSON number is) and the caller asks Jackson.
 *
 * <p>Jackson's own parser is exact but, on Java 22 and later, allocates per number (its fast
 * path wraps the digits in a {@code MemorySegment}), which for a JSON tensor is most of the
 * request's garbage. Here the digits become a {@code long} significand {@code m} and a power of
 * ten {@code e}, and:
 * <ul>
 * <li>double: Clinger's fast path, exact when {@code m < 2^53} and {@code |e| <= 22} (both factors
 * are exact doubles, so the one multiplication or division rounds once);</li>
 * <li>float: {@code m * 10^e} computed in double with at most four roundings (a relative error
 * of at most 2^-51), then rounded to float, unless that double lies within the error bound of a point
 * halfway between two floats, where the rounding could go either way. Short decimals, and the
 * 17-digit text Python writes for a float32 value, are far from those points.</li>
 * </ul>
 */
final class DecimalText {

    /** Significant digits a {@code long} holds for any digit string (10^18 < 2^63). */
    private static final int MAX_DIGITS = 18;
    private static final int MAX_EXACT_POWER = 22;
    private static final double[] POWERS_OF_TEN = new double[MAX_EXACT_POWER + 1];
    private static final long DOUBLE_EXACT_SIGNIFICAND = 1L << 53;
    /** The bits of a double's significand below a float's, and the pattern of a float midpoint there. */
    private static final long BELOW_FLOAT = (1L << 29) - 1;
    private static final long FLOAT_MIDPOINT = 1L << 28;
    /**
     * How near (in units of the double's last place) a float midpoint may be before the double is
     * not trusted: four roundings err by at most 2^-51 relative, 8 units in the last place.
     */
    private static final long MIDPOINT_MARGIN = 16;
    /**
     * Powers of ten the float path takes: up to three exact factors of 10^22, enough for every
     * float from 18 significant digits (larger: infinity; smaller: subnormal, left to Jackson).
     */
    private static final int MIN_FLOAT_EXPONENT = -3 * 22;
    private static final int MAX_FLOAT_EXPONENT = 2 * 22;
    /** Exponents past this are left to Jackson (out of range for both types anyway). */
    private static final int MAX_EXPONENT_TEXT = 9_999;

    static {
        double p = 1;
        for (int i = 0; i <= MAX_EXACT_POWER; i++) {
            POWERS_OF_TEN[i] = p;
            p *= 10;
        }
    }

    private DecimalText() {}

    /** The float nearest to {@code text[offset, offset + length)}, or NaN when this class cannot say. */
    static float parseFloat(char[] text, int offset, int length) {
        return (float) nearest(text, offset, length, true);
    }

    /** The double nearest to {@code text[offset, offset + length)}, or NaN when this class cannot say. */
    static double parseDouble(char[] text, int offset, int length) {
        return nearest(text, offset, length, false);
    }

    /**
     * Reads a JSON number ({@code -? int (. digits)? ([eE] [+-]? digits)?}, as the parser already
     * checked) into a significand and a power of ten, then rounds it to a float ({@code single})
     * or a double, or gives NaN.
     */
    private static double nearest(char[] text, int offset, int length, boolean single) {
        int i = offset;
        int end = offset + length;
        boolean negative = i < end && text[i] == '-';
        if (negative) {
            i++;
        }
        // The integer part (JSON allows no leading zero but "0" itself), then the fraction,
        // whose leading zeros after "0." only scale; digits past MAX_DIGITS may have overflowed
        // m, which is then not used.
        long m = 0;
        int intStart = i;
        for (; i < end && isDigit(text[i]); i++) {
            m = m * 10 + (text[i] - '0');
        }
        if (i == intStart || (text[intStart] == '0' && i - intStart > 1)) {
            return Double.NaN;  // not strict JSON ("+1", ".5", "01"): a parser feature allowed it
        }
        int digits = text[intStart] == '0' ? 0 : i - intStart;  // significant digits in m
        int scale = 0;  // digits after the point
        if (i < end && text[i] == '.') {
            int fractionStart = ++i;
            if (digits == 0) {
                while (i < end && text[i] == '0') {
                    i++;
                }
            }
            int significantStart = i;
            for (; i < end && isDigit(text[i]); i++) {
                m = m * 10 + (text[i] - '0');
            }
            digits += i - significantStart;
            scale = i - fractionStart;
        }
        if (digits > MAX_DIGITS) {
            return Double.NaN;
        }
        int e = 0;
        if (i < end) {  // 'e' or 'E'
            i++;
            boolean negativeExponent = i < end && text[i] == '-';
            if (i < end && (text[i] == '-' || text[i] == '+')) {
                i++;
            }
            for (; i < end; i++) {
                e = e * 10 + (text[i] - '0');
                if (e > MAX_EXPONENT_TEXT) {
                    return Double.NaN;
                }
            }
            if (negativeExponent) {
                e = -e;
            }
        }
        e -= scale;
        if (m == 0) {
            return negative ? -0.0 : 0.0;
        }
        double d = single ? nearestFloat(m, e) : nearestDouble(m, e);
        return negative ? -d : d;
    }

    private static boolean isDigit(char c) {
        return c >= '0' && c <= '9';
    }

    /** Clinger: both factors exact, so the one operation rounds once. */
    private static double nearestDouble(long m, int e) {
        if (m >= DOUBLE_EXACT_SIGNIFICAND || e < -MAX_EXACT_POWER || e > MAX_EXACT_POWER) {
            return Double.NaN;
        }
        return e >= 0 ? m * POWERS_OF_TEN[e] : m / POWERS_OF_TEN[-e];
    }

    private static double nearestFloat(long m, int e) {
        if (e < MIN_FLOAT_EXPONENT || e > MAX_FLOAT_EXPONENT) {
            return Double.NaN;
        }
        double d = m;  // exact below 2^53, else one rounding
        if (e >= 0) {
            d *= POWERS_OF_TEN[Math.min(e, MAX_EXACT_POWER)];
            if (e > MAX_EXACT_POWER) {
                d *= POWERS_OF_TEN[e - MAX_EXACT_POWER];
            }
        } else {
            int k = -e;
            for (; k > MAX_EXACT_POWER; k -= MAX_EXACT_POWER) {
                d /= POWERS_OF_TEN[MAX_EXACT_POWER];
            }
            d /= POWERS_OF_TEN[k];
        }
        // Below float's normal range a float keeps fewer bits, so the midpoint test does not apply.
        if (d < 2 * (double) Float.MIN_NORMAL) {
            return Double.NaN;
        }
        long distance = (Double.doubleToRawLongBits(d) & BELOW_FLOAT) - FLOAT_MIDPOINT;
        if (Math.abs(distance) <= MIDPOINT_MARGIN) {
            return Double.NaN;
        }
        return (float) d;  // past Float.MAX_VALUE: infinity, as the exact parse would round it
    }
}
