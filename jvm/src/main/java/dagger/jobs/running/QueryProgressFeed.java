package dagger.jobs.running;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.apache.spark.sql.streaming.StreamingQueryListener;

/**
 * Keeps a session's streaming progress as JSON for the Python driver to take in one call.
 *
 * <p>A listener written in Python has every event converted into Python objects field by field, each field
 * a round trip through py4j, while the Python driver also has to run the query's foreachBatch: in the live
 * benchmark that cost a fifth of the latency and a quarter of the JVM's CPU. This listener only stores the
 * progress' own JSON; `jobs.running.runner` drains it when it polls.
 */
public final class QueryProgressFeed extends StreamingQueryListener {

  private final ConcurrentLinkedQueue<String> progress = new ConcurrentLinkedQueue<>();
  private final Set<String> terminated = ConcurrentHashMap.newKeySet();

  @Override
  public void onQueryStarted(QueryStartedEvent event) {}

  @Override
  public void onQueryProgress(QueryProgressEvent event) {
    progress.add(event.progress().json());
  }

  @Override
  public void onQueryIdle(QueryIdleEvent event) {}

  @Override
  public void onQueryTerminated(QueryTerminatedEvent event) {
    terminated.add(event.runId().toString());
  }

  /** The progress reported since the last call, oldest first, as one JSON array (of every query). */
  public String drain() {
    List<String> taken = new ArrayList<>();
    for (String next = progress.poll(); next != null; next = progress.poll()) {
      taken.add(next);
    }
    return "[" + String.join(",", taken) + "]";
  }

  /**
   * Whether the query run with this run id has ended (stopped or failed). By run, not query id: a query
   * started again from its checkpoint keeps its id.
   */
  public boolean hasTerminated(String runId) {
    return terminated.contains(runId);
  }
}
