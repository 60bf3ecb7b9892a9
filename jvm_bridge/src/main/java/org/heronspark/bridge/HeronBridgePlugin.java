package org.heronspark.bridge;

import java.io.IOException;
import java.util.Collections;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import com.codahale.metrics.Gauge;
import com.codahale.metrics.MetricRegistry;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.json.JsonMapper;
import org.apache.spark.SparkContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;

/**
 * Publishes TMaster metrics as gauges of Spark's own metrics system, so they appear wherever
 * Spark's sinks send metrics (e.g. {@code /metrics/prometheus} with the PrometheusServlet sink)
 * under {@code <app>.driver.plugin.org.heronspark.bridge.HeronBridgePlugin.<name>}.
 *
 * <p>Installed with {@code spark.plugins}. Python sets values with {@link #setGauges} (all of a
 * metrics interval's values in one call: each py4j call is a round trip to this JVM); the gauge
 * for a name is registered the first time that name is set, since the topology's metric names
 * are only known once it runs.
 */
public class HeronBridgePlugin implements SparkPlugin {

  /** Always registered, so the plugin's registry is never empty at start-up (see init). */
  static final String COUNT_GAUGE = "bridge.gauges";

  private static final Map<String, Double> VALUES = new ConcurrentHashMap<>();
  private static MetricRegistry registry; // guarded by HeronBridgePlugin.class
  // Python's json writes NaN and Infinity for such floats; a metric may be either.
  private static final JsonMapper JSON =
      JsonMapper.builder().enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS).build();
  private static final TypeReference<Map<String, Double>> NAMES_TO_VALUES =
      new TypeReference<Map<String, Double>>() {};

  /** Sets (and on first use registers) the gauge {@code name}; callable before Spark starts. */
  public static void setGauge(String name, double value) {
    if (VALUES.put(name, value) == null) {
      register(name);
    }
  }

  /**
   * Sets every gauge of {@code json}, an object of names to numbers; returns how many. One call
   * for all of a metrics interval's values.
   */
  public static int setGauges(String json) throws IOException {
    Map<String, Double> values = JSON.readValue(json, NAMES_TO_VALUES);
    values.forEach(HeronBridgePlugin::setGauge);
    return values.size();
  }

  /** The current value of every gauge, for checks from Python. */
  public static Map<String, Double> gauges() {
    return Collections.unmodifiableMap(VALUES);
  }

  private static synchronized void register(String name) {
    if (registry == null || registry.getMetrics().containsKey(name)) {
      return; // not started yet: init registers every known name
    }
    registry.register(name, (Gauge<Double>) () -> VALUES.getOrDefault(name, Double.NaN));
  }

  private static synchronized void attach(MetricRegistry reg) {
    registry = reg;
    if (reg == null) {
      return;
    }
    // Spark only hooks a plugin's registry into its metrics system if it already holds a
    // metric after init; gauges added later then follow through Dropwizard's child-registry
    // listener. Hence one gauge registered eagerly.
    if (!reg.getMetrics().containsKey(COUNT_GAUGE)) {
      reg.register(COUNT_GAUGE, (Gauge<Integer>) VALUES::size);
    }
    for (String name : VALUES.keySet()) {
      register(name);
    }
  }

  @Override
  public DriverPlugin driverPlugin() {
    return new DriverPlugin() {
      @Override
      public Map<String, String> init(SparkContext sc, PluginContext ctx) {
        attach(ctx.metricRegistry());
        return Collections.emptyMap();
      }

      @Override
      public void shutdown() {
        attach(null); // a later SparkContext in this JVM brings its own registry
      }
    };
  }

  @Override
  public ExecutorPlugin executorPlugin() {
    return null; // containers report through the TMaster, not through executors
  }
}
