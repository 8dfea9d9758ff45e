package dagger.jobs.udfs.scripted;

/** Stands for Flink's ScalarFunction: the base class a test leaves out of the jar it packs. */
public abstract class AbsentBase {}
