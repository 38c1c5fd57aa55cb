// A broker-side metrics reporter that receives client telemetry (KIP-714) and
// writes each pushed payload to a file, for tests/integration/test_telemetry.py.
// The test compiles it against the broker's jars and puts it on the broker's
// classpath; the broker loads it by name from `metric.reporters`.
//
// File name: <sequence>-<client instance id>-<push|terminating>-<push interval ms>.otlp,
// content: the payload's OTLP MetricsData bytes, decompressed by the broker.

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;

public class FileTelemetryReporter implements MetricsReporter, ClientTelemetryExporterProvider {
    private final AtomicLong sequence = new AtomicLong();
    private Path dir;

    @Override
    public void configure(Map<String, ?> configs) {
        dir = Paths.get(String.valueOf(configs.get("telemetry.test.dir")));
    }

    @Override
    public ClientTelemetryExporter clientTelemetryExporter() {
        return (context, payload) -> {
            ByteBuffer data = payload.data().duplicate();
            byte[] bytes = new byte[data.remaining()];
            data.get(bytes);
            String name = String.format("%06d-%s-%s-%d.otlp", sequence.incrementAndGet(),
                payload.clientInstanceId(), payload.isTerminating() ? "terminating" : "push",
                context.pushIntervalMs());
            try {
                Path partial = dir.resolve(name + ".partial");
                Files.write(partial, bytes);
                Files.move(partial, dir.resolve(name), StandardCopyOption.ATOMIC_MOVE);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        };
    }

    @Override
    public void init(List<KafkaMetric> metrics) { }

    @Override
    public void metricChange(KafkaMetric metric) { }

    @Override
    public void metricRemoval(KafkaMetric metric) { }

    @Override
    public void close() { }
}
