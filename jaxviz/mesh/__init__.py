"""The mesh: a sharded program's devices, each value's layout on them, and the collectives
XLA's partitioner inserted, each at the line of the op it serves with what required it
(docs/sharding.md).

`layout.py`: the mesh in the user's names and a value's sharding per dimension
(`f32[4096@x,1024]`, one device's part); `collectives.py`: every collective of the optimised
HLO with its cause; `eager.py`: those of the programs JAX compiled for a cell's eager ops,
read from the executables its dispatch made. jaxviz.memory puts them in its reports; nothing
here compiles.
"""

from jaxviz.mesh.collectives import Collective as Collective
from jaxviz.mesh.collectives import Facts as Facts
from jaxviz.mesh.collectives import collectives as collectives
from jaxviz.mesh.layout import Mesh as Mesh
from jaxviz.mesh.layout import mesh_of as mesh_of
from jaxviz.mesh.layout import sharded_type as sharded_type
