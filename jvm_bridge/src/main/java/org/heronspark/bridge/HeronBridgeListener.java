package org.heronspark.bridge;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.scheduler.JobFailed;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskStart;

/**
 * Carries Spark scheduler events the Python driver cannot see (PySpark has no Python
 * SparkListener) into a bounded queue that the TMaster drains through py4j.
 *
 * <p>Installed with {@code spark.extraListeners}; Spark builds it on its own, so the queue is
 * static: Python reaches it through the class, never through the instance. The queue is bounded
 * so a driver that never drains cannot run out of memory; the oldest event is dropped and
 * counted, so the reader knows it missed some.
 *
 * <p>Task starts are reported only for stages of a heron_spark job group (a topology's barrier
 * stage): they tell the driver which executor hosts which container.
 */
public class HeronBridgeListener extends SparkListener {

  /** Events kept before the oldest is dropped. */
  public static final int CAPACITY = 1000;

  private static final ArrayDeque<String> EVENTS = new ArrayDeque<>();
  private static long dropped = 0L;
  /** Job group prefix of the barrier stages whose task starts are reported. */
  public static final String GROUP_PREFIX = "heron_spark:";
  private static final String GROUP_PROPERTY = "spark.jobGroup.id";
  private final Map<Integer, String> stageGroups = new ConcurrentHashMap<>();

  public HeronBridgeListener() {
  }

  @Override
  public void onExecutorRemoved(SparkListenerExecutorRemoved removed) {
    offer("{\"type\":\"executor_removed\",\"executor\":" + quote(removed.executorId())
        + ",\"reason\":" + quote(removed.reason())
        + ",\"time_ms\":" + removed.time() + "}");
  }

  @Override
  public void onStageSubmitted(SparkListenerStageSubmitted submitted) {
    Properties properties = submitted.properties();
    String group = properties == null ? null : properties.getProperty(GROUP_PROPERTY);
    if (group != null && group.startsWith(GROUP_PREFIX)) {
      stageGroups.put(submitted.stageInfo().stageId(), group);
    }
  }

  @Override
  public void onStageCompleted(SparkListenerStageCompleted completed) {
    stageGroups.remove(completed.stageInfo().stageId());
  }

  @Override
  public void onTaskStart(SparkListenerTaskStart start) {
    String group = stageGroups.get(start.stageId());
    if (group != null) {
      offer("{\"type\":\"task_start\",\"group\":" + quote(group)
          + ",\"stage\":" + start.stageId() + ",\"attempt\":" + start.stageAttemptId()
          + ",\"partition\":" + start.taskInfo().index()
          + ",\"executor\":" + quote(start.taskInfo().executorId())
          + ",\"host\":" + quote(start.taskInfo().host())
          + ",\"time_ms\":" + start.taskInfo().launchTime() + "}");
    }
  }

  @Override
  public void onJobEnd(SparkListenerJobEnd end) {
    // Succeeded jobs are the normal case and would only crowd out failures in the queue.
    if (end.jobResult() instanceof JobFailed) {
      Exception cause = ((JobFailed) end.jobResult()).exception();
      String result = cause == null ? "JobFailed" : String.valueOf(cause.getMessage());
      offer("{\"type\":\"job_end\",\"job\":" + end.jobId()
          + ",\"succeeded\":false,\"result\":" + quote(result)
          + ",\"time_ms\":" + end.time() + "}");
    }
  }

  /** Appends one JSON line, dropping the oldest when full. */
  static synchronized void offer(String json) {
    while (EVENTS.size() >= CAPACITY) {
      EVENTS.pollFirst();
      dropped++;
    }
    EVENTS.addLast(json);
  }

  /** Takes every queued event, oldest first, as JSON lines (one object each). */
  public static synchronized List<String> drainEvents() {
    List<String> out = new ArrayList<>(EVENTS);
    EVENTS.clear();
    return out;
  }

  /** How many events were dropped because the queue was full, since the JVM started. */
  public static synchronized long droppedEvents() {
    return dropped;
  }

  /** A JSON string literal; the reason / failure text may hold quotes, newlines, anything. */
  static String quote(String s) {
    if (s == null) {
      return "null";
    }
    StringBuilder b = new StringBuilder(s.length() + 2).append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"': b.append("\\\""); break;
        case '\\': b.append("\\\\"); break;
        case '\n': b.append("\\n"); break;
        case '\r': b.append("\\r"); break;
        case '\t': b.append("\\t"); break;
        default:
          if (c < 0x20) {
            b.append(String.format("\\u%04x", (int) c));
          } else {
            b.append(c);
          }
      }
    }
    return b.append('"').toString();
  }
}
