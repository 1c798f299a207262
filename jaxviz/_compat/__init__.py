"""The one door to JAX internals.

Every use of `jax._src`, every version branch and every parameter name that changed between
JAX releases lives in this package, with the version in the comment of each branch. The rest
of jaxviz receives plain data (strings, ints, tuples) or JAX's own public objects from it, by
the names re-exported here (`_compat.site_of`), whichever submodule defines them:

- `frames.py`: source locations; the user's functions and Python frames behind JAX's wrappers.
- `jaxpr.py`: jaxpr structure, avals, literals, evaluating equations, effects, key dtypes, tracers.
- `dispatch.py`: the capture hooks on JAX's dispatch paths and traces; the C++ fast path.
- `calls.py`: Python < 3.12, every jitted call, the fast path's too (the call counter).
- `flags.py`: NaN and Inf flags reduced on the device (compiled in jaxviz's thread).
- `xla.py`: compiling and running: XLA's text formats, the kept arguments, re-jitting.
- `hlo.py`: the optimised, scheduled HLO module's text as data (instructions, source frames).
- `context.py`: the tracing context jit's cache is keyed on (mesh, config), in the user's terms.

Supported: jax 0.10.2 (Python 3.11) to 0.12.x (Python 3.12); each version branch's comment
names the JAX version it serves.
"""

from __future__ import annotations

import os

from jax._src import source_info_util as _siu
from jax._src import traceback_util as _traceback_util

# jaxviz's own frames are never the user's code, and JAX's traceback filtering hides them
# from the user's tracebacks as it hides its own (jax 0.10.2 and 0.12). Registered before
# the submodules are imported below: the whole jaxviz/ package, not _compat/ alone.
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # jaxviz/
_siu.register_exclusion(PACKAGE_DIR)
_traceback_util.register_exclusion(PACKAGE_DIR)

# The submodules' names, re-exported (imports after the registration above, hence E402).
# ruff: noqa: E402
from jaxviz._compat.calls import can_count_jit_calls as can_count_jit_calls
from jaxviz._compat.calls import counting_jit_calls as counting_jit_calls
from jaxviz._compat.context import context_changes as context_changes
from jaxviz._compat.context import device_name as device_name
from jaxviz._compat.context import trace_context as trace_context
from jaxviz._compat.context import traced_into as traced_into
from jaxviz._compat.dispatch import JitCall as JitCall
from jaxviz._compat.dispatch import cache_entries as cache_entries
from jaxviz._compat.dispatch import clear_cpp_dispatch_caches as clear_cpp_dispatch_caches
from jaxviz._compat.dispatch import clear_fun_cache as clear_fun_cache
from jaxviz._compat.dispatch import clear_jits_of as clear_jits_of
from jaxviz._compat.dispatch import dispatch_key as dispatch_key
from jaxviz._compat.dispatch import donates as donates
from jaxviz._compat.dispatch import forget_jits as forget_jits
from jaxviz._compat.dispatch import frame_eqns as frame_eqns
from jaxviz._compat.dispatch import frame_invars as frame_invars
from jaxviz._compat.dispatch import has_sys_monitoring as has_sys_monitoring
from jaxviz._compat.dispatch import is_committed as is_committed
from jaxviz._compat.dispatch import is_per_primitive as is_per_primitive
from jaxviz._compat.dispatch import is_top_level as is_top_level
from jaxviz._compat.dispatch import patched_dispatch as patched_dispatch
from jaxviz._compat.dispatch import pjit_out_flat as pjit_out_flat
from jaxviz._compat.dispatch import static_args as static_args
from jaxviz._compat.dispatch import static_args_of_call as static_args_of_call
from jaxviz._compat.dispatch import watching_top_frames as watching_top_frames
from jaxviz._compat.distributed import kv_dir as kv_dir
from jaxviz._compat.distributed import kv_set as kv_set
from jaxviz._compat.distributed import process_group as process_group
from jaxviz._compat.flags import NONFINITE_MODULE as NONFINITE_MODULE
from jaxviz._compat.flags import NONFINITE_NAME as NONFINITE_NAME
from jaxviz._compat.flags import flags_lost as flags_lost
from jaxviz._compat.flags import nonfinite_flags as nonfinite_flags
from jaxviz._compat.flags import read_flags as read_flags
from jaxviz._compat.flags import settle_flags as settle_flags
from jaxviz._compat.flags import when_read as when_read
from jaxviz._compat.frames import JIT_FUNCTION_TYPE as JIT_FUNCTION_TYPE
from jaxviz._compat.frames import Loc as Loc
from jaxviz._compat.frames import UserFrame as UserFrame
from jaxviz._compat.frames import call_site as call_site
from jaxviz._compat.frames import call_span as call_span
from jaxviz._compat.frames import code_lines as code_lines
from jaxviz._compat.frames import current_name_stack as current_name_stack
from jaxviz._compat.frames import current_user_frame as current_user_frame
from jaxviz._compat.frames import error_frames as error_frames
from jaxviz._compat.frames import forget_traceback as forget_traceback
from jaxviz._compat.frames import frame_line as frame_line
from jaxviz._compat.frames import fun_name as fun_name
from jaxviz._compat.frames import in_custom_jvp_rule as in_custom_jvp_rule
from jaxviz._compat.frames import is_impl_code as is_impl_code
from jaxviz._compat.frames import is_jax_filename as is_jax_filename
from jaxviz._compat.frames import is_jax_random_fun as is_jax_random_fun
from jaxviz._compat.frames import is_user_filename as is_user_filename
from jaxviz._compat.frames import jit_wrapped_fun as jit_wrapped_fun
from jaxviz._compat.frames import loop_ranges as loop_ranges
from jaxviz._compat.frames import module_frame as module_frame
from jaxviz._compat.frames import new_traceback as new_traceback
from jaxviz._compat.frames import param_names as param_names
from jaxviz._compat.frames import raised_while_tracing as raised_while_tracing
from jaxviz._compat.frames import site_of as site_of
from jaxviz._compat.frames import staging_with as staging_with
from jaxviz._compat.frames import traceback_of as traceback_of
from jaxviz._compat.frames import unwrap as unwrap
from jaxviz._compat.frames import user_code as user_code
from jaxviz._compat.frames import user_frame as user_frame
from jaxviz._compat.frames import user_frames as user_frames
from jaxviz._compat.hlo import COLLECTIVES as COLLECTIVES
from jaxviz._compat.hlo import HloInstr as HloInstr
from jaxviz._compat.hlo import HloLeaf as HloLeaf
from jaxviz._compat.hlo import HloModule as HloModule
from jaxviz._compat.hlo import device_groups as device_groups
from jaxviz._compat.hlo import entry_parameters as entry_parameters
from jaxviz._compat.hlo import hlo_leaves as hlo_leaves
from jaxviz._compat.hlo import is_backward as is_backward
from jaxviz._compat.hlo import is_forward_of_grad as is_forward_of_grad
from jaxviz._compat.hlo import op_primitive as op_primitive
from jaxviz._compat.hlo import op_primitives as op_primitives
from jaxviz._compat.hlo import parse_hlo_module as parse_hlo_module
from jaxviz._compat.hlo import work_primitive as work_primitive
from jaxviz._compat.jaxpr import ARRAY_TYPE as ARRAY_TYPE
from jaxviz._compat.jaxpr import CALL_PRIMITIVES as CALL_PRIMITIVES
from jaxviz._compat.jaxpr import CALL_ROLES as CALL_ROLES
from jaxviz._compat.jaxpr import DROPVAR_TYPE as DROPVAR_TYPE
from jaxviz._compat.jaxpr import LITERAL_TYPE as LITERAL_TYPE
from jaxviz._compat.jaxpr import SubJaxpr as SubJaxpr
from jaxviz._compat.jaxpr import TracerOrigin as TracerOrigin
from jaxviz._compat.jaxpr import aval_nbytes as aval_nbytes
from jaxviz._compat.jaxpr import aval_of as aval_of
from jaxviz._compat.jaxpr import bind_eqn as bind_eqn
from jaxviz._compat.jaxpr import detached as detached
from jaxviz._compat.jaxpr import eval_context as eval_context
from jaxviz._compat.jaxpr import exact_results as exact_results
from jaxviz._compat.jaxpr import has_effects as has_effects
from jaxviz._compat.jaxpr import holds_jaxpr as holds_jaxpr
from jaxviz._compat.jaxpr import host_parts as host_parts
from jaxviz._compat.jaxpr import is_dropvar as is_dropvar
from jaxviz._compat.jaxpr import is_jaxpr as is_jaxpr
from jaxviz._compat.jaxpr import is_key_array as is_key_array
from jaxviz._compat.jaxpr import is_key_dtype as is_key_dtype
from jaxviz._compat.jaxpr import is_literal as is_literal
from jaxviz._compat.jaxpr import is_tracer as is_tracer
from jaxviz._compat.jaxpr import jaxpr_consts as jaxpr_consts
from jaxviz._compat.jaxpr import jaxpr_function as jaxpr_function
from jaxviz._compat.jaxpr import key_base as key_base
from jaxviz._compat.jaxpr import key_impl as key_impl
from jaxviz._compat.jaxpr import literal_text as literal_text
from jaxviz._compat.jaxpr import literal_value as literal_value
from jaxviz._compat.jaxpr import name_stack as name_stack
from jaxviz._compat.jaxpr import on_host as on_host
from jaxviz._compat.jaxpr import open_jaxpr as open_jaxpr
from jaxviz._compat.jaxpr import per_jaxpr as per_jaxpr
from jaxviz._compat.jaxpr import result_paths as result_paths
from jaxviz._compat.jaxpr import scan_counts as scan_counts
from jaxviz._compat.jaxpr import short_type as short_type
from jaxviz._compat.jaxpr import sub_jaxprs as sub_jaxprs
from jaxviz._compat.jaxpr import tracer_origin as tracer_origin
from jaxviz._compat.sharding import MeshAxes as MeshAxes
from jaxviz._compat.sharding import MeshContext as MeshContext
from jaxviz._compat.sharding import aval_axes as aval_axes
from jaxviz._compat.sharding import context_mesh as context_mesh
from jaxviz._compat.sharding import input_axes as input_axes
from jaxviz._compat.sharding import is_sharding_type_error as is_sharding_type_error
from jaxviz._compat.sharding import mesh_axes as mesh_axes
from jaxviz._compat.sharding import mesh_set as mesh_set
from jaxviz._compat.sharding import sharded_type as sharded_type
from jaxviz._compat.sharding import sharding_axes as sharding_axes
from jaxviz._compat.sharding import spec_axes as spec_axes
from jaxviz._compat.xla import backends_ready as backends_ready
from jaxviz._compat.xla import compiled_already as compiled_already
from jaxviz._compat.xla import compiled_peak as compiled_peak
from jaxviz._compat.xla import held_error as held_error
from jaxviz._compat.xla import jit_of_jaxpr as jit_of_jaxpr
from jaxviz._compat.xla import jit_options as jit_options
from jaxviz._compat.xla import kept_arg_indices as kept_arg_indices
from jaxviz._compat.xla import on_backends_ready as on_backends_ready
from jaxviz._compat.xla import on_devices as on_devices
from jaxviz._compat.xla import optimised_hlo_of_failed_compile as optimised_hlo_of_failed_compile
from jaxviz._compat.xla import parse_hlo_aliases as parse_hlo_aliases
from jaxviz._compat.xla import parse_main_args as parse_main_args
from jaxviz._compat.xla import program_hlo as program_hlo
from jaxviz._compat.xla import program_shardings as program_shardings
from jaxviz._compat.xla import read_assignment as read_assignment
from jaxviz._compat.xla import rejit as rejit
from jaxviz._compat.xla import signature_of as signature_of
from jaxviz._compat.xla import watching_compiles as watching_compiles
