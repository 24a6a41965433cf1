package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;
import org.springframework.mock.web.MockHttpServletRequest;

/** Which requests the direct inference path serves, and which it leaves to Spring MVC's mapping. */
class InferExchangeTest {

    private static MockHttpServletRequest post(String uri, String contentType, String accept) {
        MockHttpServletRequest r = new MockHttpServletRequest("POST", uri);
        if (contentType != null) {
            r.setContentType(contentType);
        }
        if (accept != null) {
            r.addHeader("Accept", accept);
        }
        return r;
    }

    @Test
    void theUsualRequestsGoDirect() {
        assertThat(InferExchange.directTarget(post("/v2/models/m/infer", null, null)))
                .isEqualTo(new InferExchange.Target("m", null));
        assertThat(InferExchange.directTarget(post("/v2/models/demo-x.1/versions/12/infer", "application/json", null)))
                .isEqualTo(new InferExchange.Target("demo-x.1", "12"));
        assertThat(InferExchange.directTarget(post("/v2/models/m/infer", "application/octet-stream",
                "application/json, */*;q=0.8"))).isNotNull();
        assertThat(InferExchange.directTarget(post("/v2/models/m/infer", "application/json; charset=UTF-8",
                "application/*"))).isNotNull();
    }

    @Test
    void whatMvcRefusesOrDecodesDifferentlyIsLeftToIt() {
        for (MockHttpServletRequest r : new MockHttpServletRequest[] {
                post("/v2/models/m/infer", "text/plain", null),
                post("/v2/models/m/infer", "application/json; charset=nope", null),
                post("/v2/models/m/infer", "application/json; boundary=x", null),
                post("/v2/models/m/infer", null, "text/html"),
                post("/v2/models/m/infer", null, "application/json;q=0"),
                post("/v2/models/m/infer", null, ";"),
                post("/v2/models/m/infer", ";", null),
                post("/v2/models/m/infer", null, ","),
                post("/v2/models/m%2Fx/infer", null, null),
                post("/v2/models/m/versions/v1/infer", null, null),
                post("/v2/models/m/infer/", null, null),
                post("/v2/models//infer", null, null),
                post("/v2/models/m/versions//infer", null, null),
                post("/v2/models/m/versions/1x/infer", null, null),
                post("/v2/models/.m/infer", null, null),
                post("/v2/models/m/x/infer", null, null),
                post("/v1/models/m/infer", null, null),
                new MockHttpServletRequest("GET", "/v2/models/m/infer")}) {
            assertThat(InferExchange.directTarget(r)).as(r.getMethod() + " " + r.getRequestURI() + " "
                    + r.getContentType() + " " + r.getHeader("Accept")).isNull();
        }
    }

    @Test
    void theBinaryHeaderLengthIsANumberABodyCouldHold() {
        assertThat(InferExchange.headerLength(null)).isNull();
        assertThat(InferExchange.headerLength(" 120 ")).isEqualTo(120);
        assertThatThrownBy(() -> InferExchange.headerLength("12x")).hasMessageContaining("is not a number: '12x'");
        assertThatThrownBy(() -> InferExchange.headerLength("")).hasMessageContaining("is not a number");
        assertThatThrownBy(() -> InferExchange.headerLength("9223372036854775807"))
                .hasMessageContaining("is larger than any request body: '9223372036854775807'");
    }

    @Test
    void weightsAboveZeroAreReadByHandAsTheProtocolWritesThem() {
        for (String q : new String[] {"q=1", "q=1.", "q=1.000", "q=0.5", "q=0.001", "q=0.10", "q=0.0001"}) {
            assertThat(InferExchange.nonZeroWeight(q, 2)).as(q).isTrue();
        }
        for (String q : new String[] {"q=", "q=0", "q=0.", "q=0.000", "q=1.5", "q=2", "q=.5", "q=0.5x", "q=01",
                "q=-0.5", "q=0,5"}) {
            assertThat(InferExchange.nonZeroWeight(q, 2)).as(q).isFalse();
        }
        // A long run of digits, ending well or badly (a regular expression backtracked over such a
        // run quadratically, on the thread reading every connection's requests).
        assertThat(InferExchange.directTarget(post("/v2/models/m/infer", null,
                "application/json;q=0." + "1".repeat(8_000) + "x"))).isNull();
        assertThat(InferExchange.nonZeroWeight("q=0." + "1".repeat(8_000), 2)).isTrue();
    }
}
