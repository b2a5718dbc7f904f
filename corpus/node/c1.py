from p23mk import mk
mk("engine","ray-cgraph-channel-timeout-vllm-multinode-tp2-acl-graph","https://github.com/ray-project/ray/issues/53845","vllm","plain",
"issue body as the search tool returned it, from the check_status frame: vLLM V1 on two nodes (tp_size=2) over the Ray executor with compiled graphs (vllm-ascend ACL graph); the first request's model step did not return within the compiled graph's read timeout and EngineCore died with RayChannelTimeoutError",
["user name in the source path replaced by <REDACTED>"],"ray-compiled-graph-channel-timeout",2,
'''ERROR 06-16 10:59:13 [core.py:505]   File "python/ray/includes/common.pxi", line 106, in ray._raylet.check_status
ERROR 06-16 10:59:13 [core.py:505] ray.exceptions.RayChannelTimeoutError: System error: Timed out waiting for object available to read. ObjectID: 00cc316456d39201286bda103a37bbae72e42e380100000004e1f505
ERROR 06-16 10:59:13 [core.py:505]
ERROR 06-16 10:59:13 [core.py:505] The above exception was the direct cause of the following exception:
ERROR 06-16 10:59:13 [core.py:505]
ERROR 06-16 10:59:13 [core.py:505] Traceback (most recent call last):
ERROR 06-16 10:59:13 [core.py:505]   File "/home/<REDACTED>/online/vllm/vllm/v1/engine/core.py", line 496, in run_engine_core
ERROR 06-16 10:59:13 [core.py:505]     engine_core.run_busy_loop()
ERROR 06-16 10:59:13 [core.py:505]   File "/home/<REDACTED>/online/vllm/vllm/v1/engine/core.py", line 523, in run_busy_loop
ERROR 06-16 10:59:13 [core.py:505]     self._process_engine_step()
ERROR 06-16 10:59:13 [core.py:505]   File "/home/<REDACTED>/online/vllm/vllm/v1/engine/core.py", line 548, in _process_engine_step
ERROR 06-16 10:59:13 [core.py:505]     outputs = self.step_fn()
ERROR 06-16 10:59:13 [core.py:505]               ^^^^^^^^^^^^^^
''')
mk("engine","ray-cgraph-channel-timeout-qwen3-vl-shared-memory-channel","https://github.com/ray-project/ray/issues/59249","vllm","plain",
"issue body as the search tool returned it, from the shared_memory_channel read frame: vLLM V1 serving Qwen3-VL over the Ray executor; the engine core's read of the compiled graph's output channel timed out (a worker step took longer than the compiled graph timeout) and the request failed",
[],"ray-compiled-graph-channel-timeout",10,
'''(EngineCore_DP0 pid=579) ERROR 12-05 22:43:45 [core.py:845] File "/usr/local/lib/python3.12/dist-packages/ray/experimental/channel/shared_memory_channel.py", line 480, in read
(EngineCore_DP0 pid=579) ERROR 12-05 22:43:45 [core.py:845] ret = self._worker.get_objects(
(EngineCore_DP0 pid=579) ERROR 12-05 22:43:45 [core.py:845] ^^^^^^^^^^^^^^^^^^^^^^^^^
(EngineCore_DP0 pid=579) ERROR 12-05 22:43:45 [core.py:845] File "/usr/local/lib/python3.12/dist-packages/ray/_private/worker.py", line 1001, in get_objects
(EngineCore_DP0 pid=579) ERROR 12-05 22:43:45 [core.py:845] ] = self.core_worker.get_objects(
(EngineCore_DP0 pid=579) ERROR 12-05 22:43:45 [core.py:845] ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
(EngineCore_DP0 pid=579) ERROR 12-05 22:43:45 [core.py:845] File "python/ray/_raylet.pyx", line 2873, in ray._raylet.CoreWorker.get_objects
(EngineCore_DP0 pid=579) ERROR 12-05 22:43:45 [core.py:845] File "python/ray/includes/common.pxi", line 123, in ray._raylet.check_status
(EngineCore_DP0 pid=579) ERROR 12-05 22:43:45 [core.py:845] ray.exceptions.RayChannelTimeoutError: System error: Timed out waiting for object available to read. ObjectID: 007e768e7da845eb498bddc26311bb55310405340100000002e1f505
(EngineCore_DP0 pid=579) ERROR 12-05 22:43:45 [core.py:845]
''')
# object store full
mk("node","ray-object-store-full-rllib-ray-put-25gb-weights","https://github.com/ray-project/ray/issues/11594","other","plain",
"issue body as the search tool returned it (the '> ' quote marks of the issue kept, the tool's '...' first line dropped): ray.put of a 25 GB weights object fails because the node's plasma object store is full of in-scope objects",
[],"ray-object-store-full",12,
'''>   File "/home/ubuntu/anaconda3/lib/python3.8/site-packages/ray/rllib/agents/trainer_template.py", line 127, in _init
>     self.train_exec_impl = execution_plan(self.workers, config)
>   File "/home/ubuntu/anaconda3/lib/python3.8/site-packages/ray/rllib/agents/ppo/ddppo.py", line 136, in execution_plan
>     rollouts = ParallelRollouts(workers, mode="raw")
>   File "/home/ubuntu/anaconda3/lib/python3.8/site-packages/ray/rllib/execution/rollout_ops.py", line 59, in ParallelRollouts
>     workers.sync_weights()
>   File "/home/ubuntu/anaconda3/lib/python3.8/site-packages/ray/rllib/evaluation/worker_set.py", line 87, in sync_weights
>     weights = ray.put(self.local_worker().get_weights())
>   File "python/ray/_raylet.pyx", line 904, in ray._raylet.CoreWorker.put_serialized_object
>   File "python/ray/_raylet.pyx", line 829, in ray._raylet.CoreWorker._create_put_buffer
>   File "python/ray/_raylet.pyx", line 142, in ray._raylet.check_status
> ray.exceptions.ObjectStoreFullError: Failed to put object ffffffffffffffffdf5a1a820100000002000000 in object store because it is full. Object size is 25892330588 bytes.
> The local object store is full of objects that are still in scope and cannot be evicted. Tip: Use the `ray memory` command to list active objects in the cluster.
''')
mk("node","ray-object-store-full-plasma-provider-200gb-object","https://github.com/ray-project/ray/issues/22176","other","plain",
"issue body as the search tool returned it (the CI page's '--' and '  | ' prefixes kept): a 219 GB object does not fit the 78 GB plasma store of the node; the raylet's plasma_store_provider logs the failed put and the store status",
[],"ray-object-store-full",1,
'''(remote_read pid=1225) [2022-02-07 04:20:03,942 E 1225 1225] plasma_store_provider.cc:122: Failed to put object 641e079764274441ffffffffffffffffffffffff0200000001000000 in object store because it is full. Object size is 219375455268 bytes.
--
  | (remote_read pid=1225) Plasma store status:
  | (remote_read pid=1225)
  | (remote_read pid=1225) (global lru) capacity: 78466815590
  | (remote_read pid=1225) (global lru) used: 0%
  | (remote_read pid=1225)
''')
mk("node","ray-object-store-full-dask-store-task-outputs","https://github.com/ray-project/ray/issues/15016","other","plain",
"comment (turn 7) as the search tool returned it; the tool cut the last line after 'Object siz'. A task's output cannot be stored because the node's object store is full; the RayTaskError chain shows it from the driver's ray.get",
[],"ray-object-store-full",13,
'''    computed_result = ray.get(object_refs)
  File "/home/ubuntu/anaconda3/envs/tensorflow_p36/lib/python3.6/site-packages/ray/_private/client_mode_hook.py", line 47, in wrapper
    return func(*args, **kwargs)
  File "/home/ubuntu/anaconda3/envs/tensorflow_p36/lib/python3.6/site-packages/ray/worker.py", line 1434, in get
    raise value.as_instanceof_cause()
ray.exceptions.RayTaskError: ray::dask:save_xarray-d9e2912f-c2f2-4e4b-a8d6-d2de5be4e069 (pid=5584, ip=172.31.26.0)
  File "python/ray/_raylet.pyx", line 455, in ray._raylet.execute_task
  File "python/ray/_raylet.pyx", line 476, in ray._raylet.execute_task
  File "python/ray/_raylet.pyx", line 346, in ray._raylet.raise_if_dependency_failed
ray.exceptions.RayTaskError: ray::dask:finalize-54c81f08-f9e9-45c7-a4bf-97ee9e945dca (pid=5197, ip=172.31.60.253)
  File "python/ray/_raylet.pyx", line 531, in ray._raylet.execute_task
  File "python/ray/_raylet.pyx", line 532, in ray._raylet.execute_task
  File "python/ray/_raylet.pyx", line 1582, in ray._raylet.CoreWorker.store_task_outputs
  File "python/ray/_raylet.pyx", line 148, in ray._raylet.check_status
ray.exceptions.ObjectStoreFullError: Failed to put object 87c1a0582234fb65ffffffffffffffffffffffff0100000001000000 in object store because it is full. Object siz
''')
