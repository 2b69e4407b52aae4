#!/bin/bash

# Copyright (c) 2020-2023, NVIDIA CORPORATION. All rights reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

# Vars without defaults
: "${MICRO_BATCH_SIZE:?MICRO_BATCH_SIZE not set}"
: "${GLOBAL_BATCH_SIZE:?GLOBAL_BATCH_SIZE not set}"
: "${TENSOR_MODEL_PARALLEL:?TENSOR_MODEL_PARALLEL_SIZE not set}"
: "${PIPELINE_MODEL_PARALLEL:?PIPELINE_MODEL_PARALLEL_SIZE not set}"
: "${INTERLEAVED_PIPELINE:?INTERLEAVED_PIPELINE not set}"
: "${SEED:?SEED not set}"
: "${WALLTIME:=?WALLTIME not set}"

# Vars with defaults
: "${LOCAL_RANK:=${SLURM_LOCALID}}"
: "${LOGGER:=""}"
: "${MULTI_NODE:=''}"
: "${OMPI_COMM_WORLD_LOCAL_RANK:=""}"
: "${SLURM_JOB_ID:=$RANDOM}"
: "${SLURM_LOCALID:=${OMPI_COMM_WORLD_LOCAL_RANK}}"
: "${SLURM_NODEID:=0}"
: "${SLURM_NTASKS_PER_NODE:=$DGXNGPU}"
: "${THROUGHPUT_RUN:=""}"
: "${UNITTEST:=0}"

: "${NVTX_FLAG:=0}"
: "${TIME_TAGS:=0}"
: "${ACT_CKPT_GRANULARITY:="selective"}"
: "${ACT_CKPT_NUM_LAYERS:=1}"
: "${ACT_CKPT_METHOD:="uniform"}"
: "${SEQ_PARALLEL:=True}"
: "${OVERLAP_PARAM_SYNC:=True}"
: "${OVERLAP_GRAD_SYNC:=True}"
: "${TP_COMM_OVERLAP:=False}"
: "${TP_CONFIG_FILE:="h100tp4pp8mbs1_tp_comm_overlap_cfg.yaml"}"
: "${OVERLAP_P2P_COMM:=True}"
: "${BATCH_P2P_COMM:=False}"
: "${SYNC_BATCH_COMM:=False}"
[ "$INTERLEAVED_PIPELINE" == "0" ] && INTERLEAVED_PIPELINE=null
${LOGGER:-} ${CMD[@]} /workspace/llm/megatron_gpt_pretraining_custom.py \
	--config-path=/workspace/llm/conf \
	--config-name=megatron_gpt_config \
	model.seed=${SEED} \
	trainer.devices=${SLURM_NTASKS_PER_NODE-$DGXNGPU} \
	trainer.num_nodes=${SLURM_JOB_NUM_NODES-1} \
	trainer.max_steps=${MAX_STEPS} \
	trainer.val_check_interval=${VAL_CHECK_INTERVAL} \
	trainer.limit_val_batches=${LIMIT_VAL_BATCHES} \
	+trainer.limit_train_batches=${LIMIT_TRAIN_BATCHES} \
	trainer.max_epochs=1 \
	exp_manager.create_checkpoint_callback=${ENABLE_RERUNS} \
	exp_manager.resume_if_exists=${ENABLE_RERUNS} \
	model.global_batch_size=${GLOBAL_BATCH_SIZE} \
	model.micro_batch_size=${MICRO_BATCH_SIZE} \
	model.tensor_model_parallel_size=${TENSOR_MODEL_PARALLEL} \
	model.pipeline_model_parallel_size=${PIPELINE_MODEL_PARALLEL} \
	model.virtual_pipeline_model_parallel_size=${INTERLEAVED_PIPELINE} \
	model.hidden_size=${HIDDEN_SIZE} \
	model.ffn_hidden_size=${FFN_HIDDEN_SIZE} \
	model.num_layers=${NUM_LAYERS} \
	model.num_attention_heads=${NUM_ATTENTION_HEADS} \
	model.data.data_prefix="${DATA_PREFIX}" \
	model.data.no_seqlen_plus_one_input_tokens=${CUSTOM_INPUT_PIPELINE} \
	model.data.exchange_indices_distributed=${EXCHANGE_INDICES_DISTRIBUTED} \
	model.optim.name=${_optimizer_name} \
	model.optim.lr=${LR} \
	model.optim.bucket_cap_mb=${BUCKET_CAP_MB} \
	model.optim.overlap_param_sync=${OVERLAP_PARAM_SYNC} \
	model.optim.overlap_grad_sync=${OVERLAP_GRAD_SYNC} \
	model.optim.sched.warmup_steps=${WARMUP_STEPS} \
	model.optim.sched.min_lr=${MIN_LR} \
	model.optim.sched.max_steps_for_lr_sched=${MAX_STEPS_FOR_LR_SCHED} \
	model.activations_checkpoint_granularity=${ACT_CKPT_GRANULARITY} \
	model.activations_checkpoint_method=${ACT_CKPT_METHOD} \
	model.activations_checkpoint_num_layers=${ACT_CKPT_NUM_LAYERS} \
	model.sequence_parallel=${SEQ_PARALLEL} \
	model.transformer_engine=${TRANSFORMER_ENGINE} \
	model.fp8=${FP8} \
	model.fp8_hybrid=${FP8_HYBRID} \
	model.fp8_amax_history_len=${FP8_AMAX_HISTORY} \
	model.fp8_amax_compute_algo=${FP8_AMAX_ALGO} \
	model.reduce_amax=${FP8_REDUCE_AMAX} \
	model.ub_tp_comm_overlap=${TP_COMM_OVERLAP} \
	model.ub_tp_comm_overlap_cfg=${TP_CONFIG_FILE} \
	model.overlap_p2p_comm=${OVERLAP_P2P_COMM} \
	model.batch_p2p_comm=${BATCH_P2P_COMM} \
	model.sync_batch_comm=${SYNC_BATCH_COMM} \
	model.custom.init_global_step=${INIT_GLOBAL_STEP} \
	model.custom.target_log_ppl=${TARGET_LOG_PPL} \
	model.custom.use_distributed_checkpointing=${USE_DIST_CHECKPOINTING} \
	model.custom.use_two_stage_loading=${USE_TWO_STAGE_LOADING} \
	model.custom.use_two_stage_cpu_transfer=${USE_TWO_STAGE_CPU_TRANSFER} \
	model.custom.run_warmup_on_synth_data=${RUN_WARMUP_ON_SYNTH_DATA} \
	model.custom.reset_fp8_stats_after_warmup=${RESET_FP8_STATS_AFTER_WARMUP} \
	model.custom.pre_validate=${PRE_VALIDATE} \
	model.custom.override_zero_consumed_samples=${OVERRIDE_ZERO_CONSUMED_SAMPLES} \
	model.custom.dataset_max_steps=${DATASET_MAX_STEPS} \
	model.custom.force_success_status=${FORCE_SUCCESS_STATUS} \
	model.custom.load_directly_on_device=${LOAD_DIRECTLY_ON_DEVICE} \
	model.custom.warmup_train_steps=${WARMUP_TRAIN_STEPS} \
	exp_manager.wandb_logger_kwargs.name=${EXPNAME} \
	trainer.log_every_n_steps=${LOG_EVERY_N_STEPS} \
	trainer.enable_progress_bar=${ENABLE_PROGRESS_BAR} \
	trainer.limit_test_batches=${LIMIT_TEST_BATCHES} \
	$EXTRA_ARGS \
	; ret_code=$?
