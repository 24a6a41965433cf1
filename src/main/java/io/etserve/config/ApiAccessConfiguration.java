package io.etserve.config;

import io.etserve.rest.RestrictedApiFilter;
import io.etserve.security.RestrictedApis;
import jakarta.servlet.DispatcherType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.Ordered;

/** Who may call which API group ({@code etserve.api.restricted}), for REST and gRPC alike. */
@Configuration(proxyBeanMethods = false)
class ApiAccessConfiguration {

    private static final Logger log = LoggerFactory.getLogger(ApiAccessConfiguration.class);

    @Bean
    RestrictedApis restrictedApis(EtServeProperties props) {
        RestrictedApis restricted = props.api().restrictedApis();
        for (RestrictedApis.Group g : RestrictedApis.Group.values()) {
            restricted.key(g).ifPresent(k -> log.info("API group {} needs header '{}'", g.tritonName(), k.header()));
        }
        return restricted;
    }

    /** First of all filters: a refused request has its body neither read nor counted. */
    @Bean
    FilterRegistrationBean<RestrictedApiFilter> restrictedApiFilter(RestrictedApis restricted) {
        var registration = new FilterRegistrationBean<>(new RestrictedApiFilter(restricted));
        registration.setOrder(Ordered.HIGHEST_PRECEDENCE + 1);  // inside UnreadBodyFilter
        registration.addUrlPatterns("/v2", "/v2/*");
        registration.setDispatcherTypes(DispatcherType.REQUEST);
        registration.setAsyncSupported(true);  // the body filter after it reads asynchronously
        return registration;
    }
}
