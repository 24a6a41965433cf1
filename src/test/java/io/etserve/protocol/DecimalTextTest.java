package io.etserve.protocol;

import static org.assertj.core.api.Assertions.assertThat;

import java.math.BigDecimal;
import java.math.MathContext;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * {@link DecimalText} against the JDK's own parser (an independent, exact implementation): every
 * answer that is not NaN must be the JDK's, bit for bit, and the texts clients usually send must
 * get an answer (else the allocation-free path would silently never run).
 */
class DecimalTextTest {

    private static final int CASES = 200_000;

    @Test
    void floatsAsPythonAndJavaWriteThemAreParsedExactly() {
        SplittableRandom random = new SplittableRandom(1);
        int answered = 0;
        int total = 0;
        for (int i = 0; i < CASES; i++) {
            float f = randomNormalFloat(random);
            // Python's json writes a float32 value as the shortest text of the double (17 digits
            // at most); the service itself writes the shortest text of the float.
            for (String text : new String[] {Double.toString(f), Float.toString(f)}) {
                total++;
                answered += checkFloat(text) ? 1 : 0;
            }
        }
        assertThat(answered).as("texts answered without Jackson").isGreaterThan(total * 99 / 100);
    }

    @Test
    void shortDecimalsAreParsedExactlyAsFloatAndDouble() {
        SplittableRandom random = new SplittableRandom(2);
        int answeredFloat = 0;
        int answeredDouble = 0;
        for (int i = 0; i < CASES; i++) {
            // Up to 15 digits and a modest exponent: what hand-written and generated requests hold.
            long digits = random.nextLong(1_000_000_000_000_000L);
            int point = random.nextInt(0, 16);
            String text = (random.nextBoolean() ? "-" : "") + withPoint(Long.toString(digits), point)
                    + (random.nextInt(4) == 0 ? "e" + random.nextInt(-8, 9) : "");
            answeredFloat += checkFloat(text) ? 1 : 0;
            answeredDouble += checkDouble(text) ? 1 : 0;
        }
        assertThat(answeredFloat).isGreaterThan(CASES * 99 / 100);
        assertThat(answeredDouble).isGreaterThan(CASES * 99 / 100);
    }

    @Test
    void decimalsNearAPointHalfwayBetweenTwoFloatsAreNeverMisrounded() {
        SplittableRandom random = new SplittableRandom(3);
        int answered = 0;
        for (int i = 0; i < CASES / 4; i++) {
            float f = randomNormalFloat(random);
            BigDecimal midpoint = new BigDecimal(f).add(new BigDecimal(Math.nextUp(f))).divide(BigDecimal.valueOf(2));
            checkFloat(midpoint.toString());  // exact: its rounding is decided by ties-to-even
            for (int precision = 14; precision <= 19; precision++) {
                BigDecimal near = midpoint.round(new MathContext(precision));
                answered += (checkFloat(near.toString()) ? 1 : 0)
                        + (checkFloat(near.add(near.ulp()).toString()) ? 1 : 0)
                        + (checkFloat(near.subtract(near.ulp()).toString()) ? 1 : 0);
            }
        }
        // Most of these are left to Jackson (within 16 units in the last place of halfway), but
        // unless many are answered here the test checks nothing of DecimalText's rounding.
        assertThat(answered).as("texts near halfway answered without Jackson").isGreaterThan(CASES / 4);
    }

    @Test
    void edgesAreExactOrLeftToJackson() {
        for (String text : new String[] {"0", "-0", "0.0", "-0.0e7", "1", "-1", "10", "0.5", "1e0", "1E+2", "1e-2",
                "3.4028235e38", "3.4028236e38", "3.5e38", "1e39", "1e44", "1e45", "1.17549435e-38", "1.4e-45",
                "1e-44", "1e-50", "123456789012345678", "1234567890123456789", "0.000000000000000000000000001",
                "9007199254740993", "9007199254740992", "1e22", "1e23", "4.9e-324", "1e400", "1e99999",
                // 2^64 and 2^65: a significand that wraps to 0 must not read as zero
                "18446744073709551616", "36893488147419103232", "18446744073709551616.0", "0.00018446744073709551616",
                "0.000", "-0.0000e-3", "100000000000000000000", "0.1000000000000000000000"}) {
            checkFloat(text);
            checkDouble(text);
        }
        assertThat(DecimalText.parseFloat("-0".toCharArray(), 0, 2)).isEqualTo(-0.0f);
        assertThat(DecimalText.parseFloat("1e39".toCharArray(), 0, 4)).isEqualTo(Float.POSITIVE_INFINITY);
        assertThat(DecimalText.parseDouble("0.1".toCharArray(), 0, 3)).isEqualTo(0.1);
        assertThat(DecimalText.parseFloat("1e-50".toCharArray(), 0, 5)).as("subnormal: Jackson's").isNaN();
        // Only strict JSON numbers: what a lenient parser feature lets through is Jackson's to read.
        for (String lenient : new String[] {"+5", ".5", "-.5", "01", "00018446744073709551616", "-007"}) {
            assertThat(DecimalText.parseFloat(lenient.toCharArray(), 0, lenient.length())).as(lenient).isNaN();
            assertThat(DecimalText.parseDouble(lenient.toCharArray(), 0, lenient.length())).as(lenient).isNaN();
        }
    }

    @Test
    void readsOnlyItsSliceOfTheBuffer() {
        char[] buffer = "xx-12.5e1yy".toCharArray();
        assertThat(DecimalText.parseFloat(buffer, 2, 7)).isEqualTo(-125f);
        assertThat(DecimalText.parseDouble(buffer, 2, 7)).isEqualTo(-125.0);
    }

    /** True when DecimalText answered (then it must be the JDK's float); false when it left it. */
    private static boolean checkFloat(String text) {
        float got = DecimalText.parseFloat(text.toCharArray(), 0, text.length());
        if (Float.isNaN(got)) {
            return false;
        }
        assertThat(Float.floatToRawIntBits(got)).as(text).isEqualTo(Float.floatToRawIntBits(Float.parseFloat(text)));
        return true;
    }

    private static boolean checkDouble(String text) {
        double got = DecimalText.parseDouble(text.toCharArray(), 0, text.length());
        if (Double.isNaN(got)) {
            return false;
        }
        assertThat(Double.doubleToRawLongBits(got)).as(text)
                .isEqualTo(Double.doubleToRawLongBits(Double.parseDouble(text)));
        return true;
    }

    /** A float from the whole normal range, either sign, magnitudes 1e-30 to 1e30 weighted alike. */
    private static float randomNormalFloat(SplittableRandom random) {
        float f = (float) (random.nextDouble(1, 10) * Math.pow(10, random.nextInt(-30, 31)));
        return random.nextBoolean() ? f : -f;
    }

    private static String withPoint(String digits, int point) {
        if (point == 0) {
            return digits;
        }
        String padded = "0".repeat(Math.max(0, point + 1 - digits.length())) + digits;
        return padded.substring(0, padded.length() - point) + "." + padded.substring(padded.length() - point);
    }
}
