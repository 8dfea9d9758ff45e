package dagger.jobs.udfs.scripted;

/** A function whose base class a test leaves out of its jar, as a Flink UDF without Flink's jars. */
public class NeedsAbsentBase extends AbsentBase {
  public String eval(String text) {
    return text;
  }
}
