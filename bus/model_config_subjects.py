"""Subjects of the model configuration commands (request-reply, answered with a CommandResult)."""

from __future__ import annotations

CMD_MODEL_CONFIG_CREATE = "cmd.model_config.create"
CMD_MODEL_CONFIG_UPDATE = "cmd.model_config.update"
CMD_MODEL_CONFIG_DELETE = "cmd.model_config.delete"
CMD_MODEL_CONFIG_SEED = "cmd.model_config.seed"
