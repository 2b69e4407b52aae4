parser.add_argument('--use_transformer_engine2',
                    default=False,
                    action='store_true',
                    help='Enable FP8 layers')
