"""evosax's README, completed: the ask-evaluate-tell loop of several strategies on a shifted
sphere, jitted, and the genetic algorithm started from an evaluated population."""
import jax
import jax.numpy as jnp

from evosax.algorithms import (CMA_ES, PGPE, SNES, Open_ES, Sep_CMA_ES, SimpleES, SimpleGA,
                               xNES)


def fitness_fn(x):
    return jnp.sum((x - 1.0) ** 2)


dummy_solution = jnp.zeros(5)
num_generations = 30
for strategy in (CMA_ES, Open_ES, SNES, PGPE, xNES, Sep_CMA_ES, SimpleES):
    es = strategy(population_size=16, solution=dummy_solution)
    params = es.default_params
    key = jax.random.key(0)
    state = es.init(key, dummy_solution, params)
    ask, tell = jax.jit(es.ask), jax.jit(es.tell)
    for i in range(num_generations):
        key, key_ask, key_eval = jax.random.split(key, 3)
        population, state = ask(key_ask, state, params)
        fitness = jax.vmap(fitness_fn)(population)
        state, metrics = tell(key, population, fitness, state, params)
    print(strategy.__name__, round(float(state.best_fitness), 4),
          [round(float(v), 3) for v in state.best_solution])

key = jax.random.key(0)
ga = SimpleGA(population_size=32, solution=dummy_solution)
params = ga.default_params
population_init = jax.random.normal(key, (ga.population_size, 5))
fitness_init = jax.vmap(fitness_fn)(population_init)
state = ga.init(key, population_init, fitness_init, params)
ask, tell = jax.jit(ga.ask), jax.jit(ga.tell)
for i in range(num_generations):
    key, key_ask = jax.random.split(key)
    population, state = ask(key_ask, state, params)
    state, metrics = tell(key, population, jax.vmap(fitness_fn)(population), state, params)
print("SimpleGA", round(float(state.best_fitness), 4))
