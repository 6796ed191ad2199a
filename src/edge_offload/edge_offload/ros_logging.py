# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Send the ROS-free modules' ``logging`` records to a node's rclpy logger.

The substrate (client, server, offloader) logs with the standard ``logging`` module so it
runs without ROS; inside a node those records must reach ``/rosout`` and the console
like the node's own, so a fallback or a refused robot shows in the node's log.
"""

from __future__ import annotations

import logging

from rclpy.node import Node


class _RclpyHandler(logging.Handler):
    def __init__(self, node: Node) -> None:
        super().__init__()
        self._logger = node.get_logger()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = f'[{record.name}] {record.getMessage()}'
            if record.exc_info:
                text += '\n' + logging.Formatter().formatException(record.exc_info)
            if record.levelno >= logging.ERROR:
                self._logger.error(text)
            elif record.levelno >= logging.WARNING:
                self._logger.warning(text)
            elif record.levelno >= logging.INFO:
                self._logger.info(text)
            else:
                self._logger.debug(text)
        except Exception:  # noqa: BLE001 - logging must never raise into the caller
            self.handleError(record)


def forward_python_logging(
    node: Node, logger_names: str | tuple[str, ...] = 'edge_offload'
) -> logging.Handler:
    """Route records of ``logger_names`` (INFO and up) to ``node``'s logger; return the handler.

    Name the loggers of the parts the node runs, so that nodes sharing a process (the
    in-process runner) each show their own records, not each other's.
    """
    handler = _RclpyHandler(node)
    for logger_name in (logger_names,) if isinstance(logger_names, str) else logger_names:
        python_logger = logging.getLogger(logger_name)
        python_logger.addHandler(handler)
        python_logger.setLevel(logging.INFO)
        python_logger.propagate = False
    return handler
