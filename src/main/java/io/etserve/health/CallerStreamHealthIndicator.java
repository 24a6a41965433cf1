package io.etserve.health;

import java.util.Map;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;

/** {@code callerStream}: exactly one caller-stream library in the process, checked on every probe. */
public final class CallerStreamHealthIndicator implements HealthIndicator {

    private final CallerStreamCheck check;

    public CallerStreamHealthIndicator(CallerStreamCheck check) {
        this.check = check;
    }

    @Override
    public Health health() {
        CallerStreamCheck.Result r = check.check();
        Health.Builder b = r.ok() ? Health.up() : Health.down();
        b.withDetail("definers", r.definers().stream()
                .map(d -> Map.of("path", d.path(), "soname", d.soname())).toList());
        if (r.ok()) {
            b.withDetail("path", r.definers().get(0).path()).withDetail("soname", r.definers().get(0).soname());
        } else {
            b.withDetail("error", r.summary());
        }
        return b.build();
    }
}
