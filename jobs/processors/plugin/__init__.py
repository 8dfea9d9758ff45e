"""JSON-RPC plugins: a transformer that hands the rows to an external program, in any language.

The program speaks JSON-RPC 2.0 on its stdin and stdout, one message per line (README, "JSON-RPC
plugins", has the protocol in full). Each Python worker starts the program once and keeps it across Arrow
batches and micro-batches: `initialize` (names, schemas, arguments), then one `process` request per chunk
of at most `batch_size` rows, answered with the records that go on (fewer, as many or more: filtering
and fan-out are allowed). The program's stderr is its log: forwarded to the worker's stderr, and its
last lines are quoted in errors.

A plugin that crashes, answers garbage or a JSON-RPC error, or does not answer within `timeout` fails the
micro-batch (so no record is lost: the restarted query replays it) with an error that names the plugin,
where it is configured and why; the process is killed and a new one starts for the next attempt. On the
driver, the program is also started once while the dagger is built (`initialize`, then `shutdown`), so a
program that does not start, or that rejects its schemas or arguments, stops the dagger before it starts.

The package: `plan` (driver: schemas, the start-up check, the `mapInArrow` step), `process` (executors:
the running program, one per plugin per Python worker), `values` (Arrow -> JSON and back), `protocol`
(its version, `PluginError`).
"""

from jobs.processors.plugin.plan import apply_plugin, plugin_name
from jobs.processors.plugin.process import PluginPlan, PluginProcess
from jobs.processors.plugin.protocol import PROTOCOL_VERSION, PluginError

__all__ = ["PROTOCOL_VERSION", "PluginError", "PluginPlan", "PluginProcess", "apply_plugin", "plugin_name"]
