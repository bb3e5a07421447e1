"""jax-md's README, completed: energies and forces of a Lennard-Jones system in a periodic
box, a Nose-Hoover NVT simulation, a cell list and a neighbour list."""
import jax
import jax.numpy as np
from jax import random

from jax_md import energy, partition, quantity, simulate, space

box_size = 25.0
displacement_fn, shift_fn = space.periodic(box_size)

N = 1000
spatial_dimension = 2
key = random.PRNGKey(0)
R = random.uniform(key, (N, spatial_dimension), minval=0.0, maxval=1.0)
energy_fn = energy.lennard_jones_pair(displacement_fn)
print('E = {:.4g}'.format(float(energy_fn(R))))
force_fn = quantity.force(energy_fn)
print('Total Squared Force = {:.4g}'.format(float(np.sum(force_fn(R) ** 2))))

# The README's NVT run, on a gentler system that stays finite: soft spheres in a small box.
N, box_size = 64, 8.0
displacement_fn, shift_fn = space.periodic(box_size)
R = random.uniform(key, (N, spatial_dimension), maxval=box_size)
energy_fn = energy.soft_sphere_pair(displacement_fn)
init, update = simulate.nvt_nose_hoover(energy_fn, shift_fn, 1e-3, kT=0.1)
state = init(key, R)
update = jax.jit(update)
for _ in range(100):
    state = update(state)
R = state.position
print(round(float(energy_fn(R)), 5),
      round(float(quantity.temperature(momentum=state.momentum, mass=state.mass)), 5))

cell_size = 2.0
capacity = 10
cell_list_fn = partition.cell_list(box_size, cell_size, capacity)
cell_list_data = cell_list_fn.allocate(R)
print(cell_list_data.id_buffer.shape, int(np.sum(cell_list_data.id_buffer < N)))

neighbor_list_fn = partition.neighbor_list(displacement_fn, box_size, cell_size)
neighbors = neighbor_list_fn.allocate(R)
neighbors = neighbors.update(R)
if neighbors.did_buffer_overflow:
    neighbors = neighbor_list_fn.allocate(R)
energy_nl = energy.soft_sphere_neighbor_list(displacement_fn, box_size)[1]
print(neighbors.idx.shape[0] == N, round(float(energy_nl(R, neighbors)), 5),
      round(float(energy_fn(R)), 5))
