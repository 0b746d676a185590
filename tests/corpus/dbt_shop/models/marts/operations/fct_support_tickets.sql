{%- set priorities = ['urgent', 'high', 'normal', 'low'] -%}

with tickets as (

    select * from {{ ref('int_tickets__resolution') }}

),

customers as (

    select customer_id, email, customer_segment from {{ ref('dim_customers') }}

)

select
    tickets.ticket_id,
    customers.customer_id,
    customers.customer_segment,
    tickets.priority,
    case tickets.priority
        {% for priority in priorities -%}
        when '{{ priority }}' then {{ loop.index }}
        {% endfor -%}
        else 99
    end as priority_rank,
    tickets.ticket_status,
    tickets.ticket_channel,
    tickets.opened_at,
    tickets.solved_at,
    tickets.minutes_to_first_reply,
    tickets.hours_to_solve
from tickets
left join customers
    on tickets.requester_email = customers.email
