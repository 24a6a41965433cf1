package io.etserve.health;

import org.springframework.boot.health.actuate.endpoint.HealthDescriptor;
import org.springframework.boot.health.actuate.endpoint.HealthEndpoint;
import org.springframework.boot.health.actuate.endpoint.HealthEndpointGroup;
import org.springframework.boot.health.actuate.endpoint.HealthEndpointGroups;
import org.springframework.boot.health.contributor.Status;

/**
 * The one health truth behind both surfaces: the protocol's {@code /v2/health/live} and
 * {@code /v2/health/ready} ask the very actuator groups Kubernetes probes ({@code liveness},
 * {@code readiness}) and map their status with the group's own HTTP mapper, so KServe/Triton
 * clients and the kubelet can never see different answers.
 */
public final class ProbeHealth {

    public static final String LIVENESS = "liveness";
    public static final String READINESS = "readiness";

    private final HealthEndpoint endpoint;
    private final HealthEndpointGroups groups;

    public ProbeHealth(HealthEndpoint endpoint, HealthEndpointGroups groups) {
        this.endpoint = endpoint;
        this.groups = groups;
    }

    /** The HTTP status actuator answers for {@code /actuator/health/liveness}. */
    public int liveness() {
        return statusCode(LIVENESS);
    }

    /** The HTTP status actuator answers for {@code /actuator/health/readiness}. */
    public int readiness() {
        return statusCode(READINESS);
    }

    private int statusCode(String group) {
        HealthEndpointGroup g = groups.get(group);
        HealthDescriptor health = endpoint.healthForPath(group);
        if (g == null || health == null) {
            // The probe groups are switched on in application.yml; without them nothing is known.
            return 503;
        }
        Status status = health.getStatus();
        return g.getHttpCodeStatusMapper().getStatusCode(status);
    }
}
