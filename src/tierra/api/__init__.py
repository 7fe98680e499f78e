"""Typed objects of tierra's world and the snapshot files they are read from.

Core types are frozen dataclasses; decoding from the wire records every problem with
its file, document, object and field path instead of stopping at the first.
"""

from tierra.api.hypernode import (
    TIERRA_GROUP,
    VOLCANO_GROUP,
    HyperNode,
    HyperNodeStatus,
    LinkSpec,
    Member,
    MemberSelector,
    MemberType,
    UnhealthyNode,
    decode_hypernode,
    encode_hypernode,
)
from tierra.api.labels import LabelSelector, Operator, Requirement
from tierra.api.manifest import dump_json, dump_yaml
from tierra.api.meta import ObjectMeta
from tierra.api.node import Condition, Node, Taint, TaintEffect
from tierra.api.pod import GROUP_NAME_ANNOTATION, Phase, Pod, Toleration
from tierra.api.podgroup import NetworkTopology, PodGroup, SubGroupPolicy, TopologyMode
from tierra.api.priority import PriorityClass
from tierra.api.quantity import QuantityError, milli_to_quantity, parse_quantity, to_milli
from tierra.api.queue import Queue
from tierra.api.snapshot import Snapshot, load_snapshot, read_documents
from tierra.api.vcjob import VolcanoJob, expand_job

__all__ = [
    "GROUP_NAME_ANNOTATION",
    "TIERRA_GROUP",
    "VOLCANO_GROUP",
    "Condition",
    "HyperNode",
    "HyperNodeStatus",
    "LabelSelector",
    "LinkSpec",
    "Member",
    "MemberSelector",
    "MemberType",
    "NetworkTopology",
    "Node",
    "ObjectMeta",
    "Operator",
    "Phase",
    "Pod",
    "PodGroup",
    "PriorityClass",
    "QuantityError",
    "Queue",
    "Requirement",
    "Snapshot",
    "SubGroupPolicy",
    "Taint",
    "TaintEffect",
    "Toleration",
    "TopologyMode",
    "UnhealthyNode",
    "VolcanoJob",
    "decode_hypernode",
    "dump_json",
    "dump_yaml",
    "encode_hypernode",
    "expand_job",
    "load_snapshot",
    "milli_to_quantity",
    "parse_quantity",
    "read_documents",
    "to_milli",
]
