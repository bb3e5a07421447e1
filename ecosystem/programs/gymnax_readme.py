"""gymnax's README, completed: make an environment, reset, sample, step (auto-reset info),
jit and vmap the step, the wrappers it shows, and a rollout; prints rounded figures."""
import jax
import jax.numpy as jnp
import numpy as np

import gymnax
from gymnax.wrappers import LegacyStepAPIWrapper, StickyActionWrapper


def figures(tree):
    leaves = [np.ravel(np.asarray(v, np.float64)) for v in jax.tree.leaves(tree)]
    return np.round(np.concatenate(leaves), 4).tolist()


key = jax.random.key(0)
key, key_reset, key_act, key_step = jax.random.split(key, 4)
for name in ["Pendulum-v1", "CartPole-v1", "MountainCarContinuous-v0", "Acrobot-v1"]:
    env, env_params = gymnax.make(name)
    obs, state = env.reset(key_reset, env_params)
    action = env.action_space(env_params).sample(key_act)
    n_obs, n_state, reward, terminated, truncated, info = env.step(
        key_step, state, action, env_params)
    bootstrap_obs = info["final_observation"]
    bootstrap_mask = 1.0 - info["terminated"].astype(jnp.float32)
    print(name, figures(n_obs), round(float(reward), 4), figures(bootstrap_obs),
          float(bootstrap_mask))

    # 50 jitted steps of random actions, and a batch of 3 steps by vmap.
    step = jax.jit(env.step)
    k, total = key_step, 0.0
    for _ in range(50):
        k, k_act, k_step = jax.random.split(k, 3)
        a = env.action_space(env_params).sample(k_act)
        n_obs, n_state, reward, terminated, truncated, info = step(k_step, n_state, a, env_params)
        total += float(reward)
    print(name, figures(n_obs), round(total, 3))
    batch = jax.vmap(env.step, in_axes=(0, None, None, None))(
        jax.random.split(key_step, 3), state, action, env_params)
    print(name, figures(batch[0]), figures(batch[2]))

env, env_params = gymnax.make("CartPole-v1")  # sticky actions need a discrete action space
obs, state = env.reset(key_reset, env_params)
sticky = StickyActionWrapper(env, sticky_action_prob=0.1)
legacy = LegacyStepAPIWrapper(env)
action = env.action_space(env_params).sample(key_act)
s_obs, s_state, s_reward = sticky.step(key_step, sticky.reset(key_reset, env_params)[1],
                                       action, env_params)[:3]
l_obs, l_state, l_reward, l_done, l_info = legacy.step(key_step, state, action, env_params)
print(figures(s_obs), round(float(s_reward), 4), figures(l_obs), round(float(l_reward), 4),
      bool(l_done))


# A whole episode under lax.scan, as the rollout helpers run it.
env, env_params = gymnax.make("Pendulum-v1")
def rollout(key, steps=200):
    key, key_reset = jax.random.split(key)
    obs, state = env.reset(key_reset, env_params)

    def one(carry, key):
        state, ret = carry
        k_act, k_step = jax.random.split(key)
        a = env.action_space(env_params).sample(k_act)
        obs, state, reward, terminated, truncated, _ = env.step(k_step, state, a, env_params)
        return (state, ret + reward), obs

    (state, ret), observations = jax.lax.scan(one, (state, 0.0), jax.random.split(key, steps))
    return ret, observations


returns, observations = jax.jit(jax.vmap(rollout))(jax.random.split(key, 4))
print(figures(returns), observations.shape)
